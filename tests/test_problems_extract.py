"""solforge.problems: extraction end to end on the CPU, dedup across models, the CLI and the Prefect task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_bench.problem import find_problems, load_problem
from solforge.problems import ExtractError, extract, merge, parse_override, write_problems
from solforge.problems.validate import run_reference_cpu, sol_times

FIXTURE = Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small"


def _check_all(root: Path) -> list[str]:
    names = []
    for path in find_problems(root):
        problem = load_problem(path)
        run_reference_cpu(problem)
        names.append(problem.name)
    return names


def test_extract_small_llm_end_to_end(tmp_path):
    # A small vocabulary keeps the embedding and LM-head weights cheap on the CPU.
    drafts = extract("qwen2.5-0.5b", {"vocab_size": 1000})
    paths = write_problems(drafts, tmp_path)
    assert len(paths) == len(drafts) >= 15
    names = _check_all(tmp_path)
    assert {"decoder_layer_h896_q14_kv2_d64_i4864_theta1000000_eps6_qkvbias_bf16", "swiglu_bwd_i4864_bf16",
            "embedding_v1000_h896_bf16"} <= set(names)  # fmt: skip
    d = json.loads((tmp_path / "L2" / "mlp_swiglu_h896_i4864_bf16" / "definition.json").read_text())
    src = d["provenance"]["sources"][0]
    assert src["model"] == "Qwen/Qwen2.5-0.5B [vocab_size=1000]"
    assert src["config"] == {"hidden_size": 896, "intermediate_size": 4864}
    assert "model.layers.*.mlp" in d["description"]
    for w in load_problem(tmp_path / "L2" / "mlp_swiglu_h896_i4864_bf16").workloads:
        assert w.tolerance.max_atol > 0


def test_extract_small_vision_end_to_end(tmp_path):
    paths = write_problems(extract("vit-b16"), tmp_path)
    assert len(paths) == 5
    assert len(_check_all(tmp_path)) == 5
    attn = load_problem(tmp_path / "L2" / "encoder_attention_h768_heads12_n197_bf16")
    assert attn.definition.custom_inputs_entrypoint == "make_inputs"
    assert len(attn.workloads) >= 5
    times = sol_times(attn)
    if times is not None:  # the SOL analyzer is installed: every workload gets a positive T_SOL
        assert len(times) == len(attn.workloads) and min(times) > 0


def test_every_problem_has_five_workloads_and_index_inputs_are_custom():
    for arch in ("llama3-8b", "mixtral-8x7b", "deepseek-v3", "whisper-large-v3", "sd15-unet"):
        for d in extract(arch):
            assert len(d.workloads) >= 5, d.name
            int_inputs = [n for n, s in d.inputs.items() if s["dtype"].startswith("int")]
            if int_inputs:
                assert d.custom_inputs_entrypoint, d.name


def test_identical_problems_are_stored_once_with_every_model(tmp_path):
    llama = extract("llama3-8b", ops=["rmsnorm", "mlp_block"])
    mistral = extract("mistral-7b", ops=["rmsnorm", "mlp_block", "rope"])
    merged = merge([*llama, *mistral])
    assert len(merged) == 3  # rmsnorm and the MLP are shared; Mistral's rope has another theta
    norm = next(d for d in merged if d.op_type == "rmsnorm")
    assert norm.models() == ["meta-llama/Meta-Llama-3-8B", "mistralai/Mistral-7B-v0.1"]
    # Written one model at a time, the second run adds itself to the problem already on disk.
    write_problems(llama, tmp_path)
    write_problems(mistral, tmp_path)
    assert len(find_problems(tmp_path)) == 3
    d = json.loads((tmp_path / "L1" / norm.name / "definition.json").read_text())
    assert d["hf_id"] == ["meta-llama/Meta-Llama-3-8B", "mistralai/Mistral-7B-v0.1"]
    assert [s["arch"] for s in d["provenance"]["sources"]] == ["llama3-8b", "mistral-7b"]
    assert not [p for p in (tmp_path / "L1").iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_a_different_problem_under_the_same_name_is_refused(tmp_path):
    (draft,) = extract("llama3-8b", ops=["rmsnorm"])
    write_problems([draft], tmp_path)
    target = tmp_path / "L1" / draft.name / "workload.jsonl"
    target.write_text(target.read_text().splitlines()[0] + "\n")
    with pytest.raises(ExtractError, match="different problem"):
        write_problems([draft], tmp_path)
    write_problems([draft], tmp_path, overwrite=True)
    assert len(load_problem(target.parent).workloads) == len(draft.workloads)


def test_bad_requests_are_clear_errors():
    with pytest.raises(ExtractError, match="unknown architecture"):
        extract("gpt-17")
    with pytest.raises(ExtractError, match="unknown config keys"):
        extract("llama3-8b", {"hiden_size": 4})
    with pytest.raises(ExtractError, match="no ops"):
        extract("llama3-8b", ops=["nope"])
    assert parse_override("rope_theta=10000.0") == ("rope_theta", 10000.0)
    assert parse_override("attention_bias=true") == ("attention_bias", True)
    with pytest.raises(ExtractError):
        parse_override("hidden_size")


def test_fp8_dtype_turns_projections_into_block_scaled_gemms():
    drafts = extract("qwen2.5-0.5b", dtype="fp8", ops=["q_proj", "rmsnorm"])
    gemm = next(d for d in drafts if d.op_type == "fp8_gemm")
    assert gemm.category == "Quant" and gemm.inputs["b"]["dtype"] == "float8_e4m3fn"
    assert next(d for d in drafts if d.op_type == "rmsnorm").inputs["x"]["dtype"] == "bfloat16"


def test_cli_extract_and_list(tmp_path):
    from solforge.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["problems", "extract", "--list"])
    assert res.exit_code == 0 and "whisper-large-v3" in res.output
    res = runner.invoke(cli, ["problems", "extract", "--model", "llava-1.5-7b", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert len(find_problems(tmp_path)) == 1
    res = runner.invoke(cli, ["problems", "extract", "--model", "llava-1.5-7b", "--config", "nope=1", "-o", "x"])
    assert res.exit_code == 2 and "unknown config keys" in res.output
    help_text = runner.invoke(cli, ["problems", "extract", "--help"]).output
    assert "Example:" in help_text and "solforge problems extract --model" in help_text


def test_prefect_task_writes_problems(tmp_path):
    from tasks.extract_problem import extract_problem

    out = extract_problem.fn("dit-xl-2-256", str(tmp_path), level="l2")
    assert [Path(p).name for p in out] == ["dit_block_h1152_heads16_f4608_n256_bf16"]
    load_problem(Path(out[0]))


def test_dataset_nested_under_category_folders_loads(tmp_path):
    # A SOL-ExecBench-style download: problem dirs under category folders, at different depths.
    for rel in ("L1/rmsnorm_a", "L2/rmsnorm_b", "Quant/sub/rmsnorm_c"):
        d = tmp_path / "dataset" / rel
        d.mkdir(parents=True)
        definition = json.loads((FIXTURE / "definition.json").read_text())
        definition["name"] = d.name
        (d / "definition.json").write_text(json.dumps(definition))
        (d / "workload.jsonl").write_text((FIXTURE / "workload.jsonl").read_text())
    (tmp_path / "dataset" / "README.md").write_text("not a problem")
    paths = find_problems(tmp_path / "dataset")
    assert [p.name for p in paths] == ["rmsnorm_a", "rmsnorm_b", "rmsnorm_c"]
    assert [load_problem(p).name for p in paths] == ["rmsnorm_a", "rmsnorm_b", "rmsnorm_c"]
