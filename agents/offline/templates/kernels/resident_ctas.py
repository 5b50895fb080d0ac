


def _resident(kernel, warps, device):
    if hasattr(kernel, "_init_handles"):  # Triton loads the binary (and reads its registers) lazily
        kernel._init_handles()
    props = torch.cuda.get_device_properties(device)
    smem = getattr(props, "shared_memory_per_multiprocessor", 233472)
    regs = getattr(props, "regs_per_multiprocessor", 65536)
    threads = getattr(props, "max_threads_per_multi_processor", 2048)
    by_smem = smem // (kernel.metadata.shared + 1024)
    by_regs = regs // max(kernel.n_regs * 32 * warps, 1)
    fits = min(by_smem, by_regs, threads // (32 * warps), 32)
    if fits < 1:
        raise RuntimeError(f"_mlp_fused: one CTA needs {kernel.metadata.shared} B of shared memory and "
                           f"{kernel.n_regs} registers a thread, more than an SM has")
    return fits
