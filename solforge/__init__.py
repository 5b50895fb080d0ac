"""solforge: agents that write GPU kernels, judged by sol_bench, orchestrated by Prefect and Dask."""
