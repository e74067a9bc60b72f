# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A large language model at today's scale
#
# GPT-3 175B with Megatron's tensor (8, inside a server), pipeline (16) and data parallelism, on
# 1,024 to 16,384 GPUs: how its traffic grows with the cluster, and what an H100 cluster with
# 8 x 400 Gbps NICs per server buys over an A100 one. Everything here goes through the Python API
# (`import topoopt`, docs/api.md).

# %%
import pandas as pd
import plotly.express as px

import topoopt


def gpt3(gpus: int) -> dict:
    """GPT-3 175B, tp 8 pp 16, dp = GPUs / 128, 1,536 sequences per data-parallel group of 8."""
    dp = gpus // 128
    return {
        "model": "gpt3-175b",
        "parallelism": {"tp": 8, "pp": 16, "dp": dp, "global_batch_size": 192 * dp},
        "cluster": {"servers": gpus // 8, "gpus_per_server": 8},
    }


rows = []
for gpus in (1024, 2048, 4096, 8192, 16384):
    w = topoopt.load_workload(gpt3(gpus))
    by = w.bytes_by_class()
    rows.append(
        {"gpus": gpus, **{f"{c} (TB)": b / 1e12 for c, b in by.items()},
         "bytes per GPU (GB)": w.total_wire_bytes() / gpus / 1e9}
    )  # fmt: skip
traffic = pd.DataFrame(rows).set_index("gpus")
traffic

# %% [markdown]
# Weak scaling: each data-parallel group keeps its batch, so the bytes per GPU stay the same and
# the cluster's traffic grows with it. Tensor parallelism dominates and stays inside the server
# (NVLink); what crosses the network is the pipeline and the data-parallel gradient sync.

# %%
px.bar(
    traffic.drop(columns="bytes per GPU (GB)").reset_index().melt("gpus"),
    x="gpus", y="value", color="variable", log_y=True,
    labels={"value": "TB per iteration", "variable": "class"},
    title="GPT-3 175B: bytes per iteration by class",
)  # fmt: skip

# %% [markdown]
# ## The GPU changes how much the network matters
# The same plan on 256 GPUs (32 servers; `gpt3-175b-32`), on an ideal switch and on the fat-tree a
# buyer would build, with 8 NICs of 400 Gbps per server, for A100 and H100 (the hardware
# catalogue's defaults, `traffic/hardware/catalogue.yaml`).

# %%
cmp = []
for gpu in ("a100-80gb", "h100-sxm"):
    t = topoopt.compare(
        "gpt3-175b-32", fabrics=["ideal", "fat-tree", "rail-only"], degree=8, link_gbps=400,
        gpu=gpu,
    )  # fmt: skip
    t["gpu"] = gpu
    cmp.append(t)
cmp = pd.concat(cmp)
cmp[["gpu", "fabric", "iteration_s", "exposed_comm_s", "capex_usd", "tflops_per_gpu", "mfu"]]

# %%
px.bar(
    cmp, x="fabric", y="iteration_s", color="gpu", barmode="group",
    title="GPT-3 175B on 256 GPUs, 8 x 400 Gbps per server: iteration time",
)  # fmt: skip

# %%
ideal = cmp[cmp["fabric"] == "ideal"].set_index("gpu")
speedup = ideal.loc["a100-80gb", "iteration_s"] / ideal.loc["h100-sxm", "iteration_s"]
share = (ideal["exposed_comm_s"] / ideal["iteration_s"]).round(3)
print(f"H100 over A100 on the ideal switch: {speedup:.2f}x faster per iteration")
print("exposed communication share of the iteration:", share.to_dict())
h = cmp[cmp["gpu"] == "h100-sxm"].set_index("fabric")
t_ratio = h.loc["rail-only", "iteration_s"] / h.loc["fat-tree", "iteration_s"]
c_ratio = h.loc["rail-only", "capex_usd"] / h.loc["fat-tree", "capex_usd"]
print(f"rail-only: {t_ratio:.4f}x the full fat-tree's iteration for {c_ratio:.0%} of its capex")

# %% [markdown]
# ## Conclusion
# The traffic of a Megatron plan grows with the cluster at a constant number of bytes per GPU, and
# most of it (tensor parallelism) never leaves the server. A faster GPU shortens the compute, so
# the same network becomes a larger share of each iteration (6 % of an A100 iteration, 11 % of an
# H100 one here, for a 2.6x faster iteration). At 32 servers with 8 x 400 Gbps per server both
# switched fabrics are within 0.01 % of the ideal switch, and rails without a spine match the
# full fat-tree for about 56 % of its capex: the direction of the Rail-only paper (38-77 % less).
# Whether optics pay is a question for thousands of servers, where every extra switch tier costs
# ports and transceivers (`topoopt advise`, docs/advise.md).
