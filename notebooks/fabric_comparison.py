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
# # Comparing fabrics at equal cost
#
# A data-parallel job (VGG-16) and a model-parallel one (DLRM) on 16 servers, swept over the
# number of ports per server and the port bandwidth. Each fabric gets the same per-server
# bandwidth; the cost-equivalent fat-tree costs what the TopoOpt optical design costs.

# %%
import pandas as pd
import plotly.express as px

from topoopt.app.studies.sweep import sweep
from traffic import load_workload

FABRICS = ["ideal", "fat-tree-cost-equivalent", "expander", "topoopt", "joint"]
results = {}
for plan in ("vgg16-dp", "dlrm"):
    results[plan] = sweep(
        load_workload(plan),
        degrees=(4, 8),
        link_bandwidths=(5e9, 12.5e9),
        fabrics=FABRICS,
        time_limit_s=5,
    )
table = results["dlrm"][
    ["degree", "link_bandwidth", "fabric", "iteration_s", "capex_usd", "ratio_to_ideal"]
]
table.round(4)

# %% [markdown]
# ## Iteration time relative to the ideal switch
# Bars per fabric, one panel per (ports, Gbps) point.

# %%
frames = []
for plan, df in results.items():
    frames.append(df.assign(plan=plan, gbps=df["link_bandwidth"] * 8 / 1e9))
both = pd.concat(frames, ignore_index=True)
px.bar(
    both,
    x="fabric",
    y="ratio_to_ideal",
    color="plan",
    barmode="group",
    facet_col="degree",
    facet_row="gbps",
    title="Iteration time / ideal switch",
)

# %% [markdown]
# ## Iteration time against network cost
# The TopoOpt paper's view: lower and to the left is better.

# %%
px.scatter(
    both[both["fabric"] != "ideal"],
    x="capex_usd",
    y="iteration_s",
    color="fabric",
    symbol="plan",
    facet_col="degree",
    log_y=True,
    hover_data=["gbps"],
    title="Iteration time vs network capex",
)

# %%
# simulated iteration time of the joint design over the TopoOpt baseline's, per sweep point
joint = both[both["fabric"] == "joint"].set_index(["plan", "degree", "gbps"])["iteration_s"]
topo = both[both["fabric"] == "topoopt"].set_index(["plan", "degree", "gbps"])["iteration_s"]
(joint / topo).rename("joint / topoopt").to_frame()
