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
# # Traffic of a training iteration, from parallelization plans
#
# Every design in topoopt starts from the traffic a plan produces. This notebook compares GPT-3
# 175B under three plans, a mixture-of-experts model and DLRM: bytes per class, intra- versus
# inter-server bytes, and the server-level traffic matrices.

# %%
import pandas as pd

from topoopt.app.report.traffic_figures import class_bars, server_heatmap
from traffic import expand, load_plan, workload_from_plan
from traffic.summary import class_table, traffic_summary

BASE = load_plan("gpt3-175b").model_dump(mode="json", exclude_none=True)


def variant(**parallelism):
    doc = {k: v for k, v in BASE.items() if k in ("model", "precision", "cluster", "options")}
    doc["parallelism"] = {**BASE["parallelism"], **parallelism}
    return doc


plans = {
    "GPT-3 t8 p16 d8": "gpt3-175b",
    "GPT-3 t8 p8 d16 +SP": variant(tp=8, pp=8, dp=16, sp=True),
    "GPT-3 FSDP (full_shard, t8)": "gpt3-175b-fsdp",
    "Mixtral 8x7B (EP)": "mixtral-8x7b",
    "DLRM (TopoOpt config)": "dlrm",
}
workloads = {label: workload_from_plan(p) for label, p in plans.items()}

# %% [markdown]
# ## Bytes per class
# Wire bytes per iteration summed over all GPUs (ring algorithm), split by where they flow.

# %%
rows = []
for label, w in workloads.items():
    s = traffic_summary(w)
    rows.append(
        {
            "plan": label,
            "gpus": s["gpus"],
            "servers": s["servers"],
            **{f"{c} (GB)": b / 1e9 for c, b in s["bytes_by_class"].items()},
            "inter-server (GB)": s["inter_server_bytes"] / 1e9,
            "intra-server (GB)": s["intra_server_bytes"] / 1e9,
        }
    )
summary = pd.DataFrame(rows).set_index("plan").fillna(0.0)
summary.round(1)

# %% [markdown]
# The three GPT-3 plans move very different amounts across servers. With TP inside a server only
# pipeline and data-parallel traffic leaves it; with sequence parallelism each TP rank sends only
# 1/t of the tensor at a pipeline boundary; FSDP (full_shard) has no pipeline at all and instead
# all-gathers parameters and reduce-scatters gradients among the 128 data-parallel ranks of each
# tensor-parallel slice.

# %%
assert (summary["inter-server (GB)"] > 0).all()
w = workloads["GPT-3 t8 p16 d8"]
pairs = expand(w, "ring", "server")
class_bars(class_table(w, pairs), title="GPT-3 t8 p16 d8: bytes per class")

# %% [markdown]
# ## Server-level traffic matrices
# Log colour scale; hover shows source, destination, bytes and the classes that contribute.

# %%
server_heatmap(pairs, title="GPT-3 175B, t8 p16 d8 on 128 servers")

# %%
w = workloads["Mixtral 8x7B (EP)"]
server_heatmap(expand(w, "ring", "server"), title="Mixtral 8x7B: expert all-to-all + DP")

# %%
w = workloads["DLRM (TopoOpt config)"]
server_heatmap(expand(w, "ring", "server"), title="DLRM: embedding all-to-all + MLP all-reduce")

# %% [markdown]
# ## Collective algorithms change who talks to whom, not how much
# The same GPT-3 plan under the ring, halving-doubling and hierarchical algorithms: identical
# totals, different pair counts.

# %%
w = workloads["GPT-3 t8 p16 d8"]
algos = pd.DataFrame(
    [
        {
            "algorithm": a,
            "total bytes": (p := expand(w, a, "server")).total(),
            "server pairs": p.matrix().nnz,
        }
        for a in ("ring", "halving-doubling", "tree", "direct", "hierarchical")
    ]
).set_index("algorithm")
assert algos["total bytes"].nunique() == 1
algos
