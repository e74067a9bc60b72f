"""Model shapes and the zoo of named models.

A :class:`ModelSpec` is the shape of one model: a transformer (dense or mixture-of-experts), a
recommendation model (embedding tables + MLPs) or a pure data-parallel model known only by its
parameter count. :data:`ZOO` maps names to the raw fields of each entry; :func:`get_model` returns
the validated spec. Every entry cites its source below.

Sources
-------
- ``gpt3-175b``: Brown et al., "Language Models are Few-Shot Learners" (2020), Table 2.1 (l=96,
  h=12288, 96 heads, s=2048); vocabulary 50,257 padded to 51,200 and global batch 1,536 as in
  Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM" (SC'21), Table 1 and section 5.1. Learned positions, tied embeddings, LayerNorm,
  biases, FFN 4h.
- ``llama2-7b``, ``llama2-70b``: Touvron et al., "Llama 2" (2023), Table 1, and the released
  ``config.json`` files (hidden, intermediate size, heads, key-value heads, vocab 32,000, 4,096
  context). Published totals: 6,738,415,616 and 68,976,648,192 parameters.
- ``llama3-8b``, ``llama3-70b``, ``llama3-405b``: Llama Team, "The Llama 3 Herd of Models" (2024),
  Table 3 (layers, model dim, FFN dim, heads, 8 key-value heads, vocab 128,256), 8,192 context.
- ``mixtral-8x7b``: Jiang et al., "Mixtral of Experts" (2024), Table 1 (dim 4096, 32 layers,
  head_dim 128, 32 heads, 8 kv heads, hidden 14336, vocab 32000, 8 experts, top-2); context 32,768.
- ``deepseek-v3``: DeepSeek-AI, "DeepSeek-V3 Technical Report" (2024), section 4.2: 61 layers,
  hidden 7168, 128 heads of 128, first 3 layers dense (FFN 18432), the rest MoE with 1 shared +
  256 routed experts of FFN 2048, top-8, vocab 129,280, 4,096 pre-training sequence. *Shape only*:
  multi-head latent attention is modelled as standard multi-head attention with the same heads and
  head size, so the parameter count is not the published 671B.
- ``bert-large``: Devlin et al., "BERT" (2019): l=24, h=1024, 16 heads, FFN 4096, vocab 30,522,
  512 positions, 2 token types. Counted as the Hugging Face ``BertModel`` (embeddings, encoder,
  pooler): 31,782,912 + 24 * 12,596,224 + 1,049,600 = 335,141,888 parameters.
- ``resnet50``: He et al. (2016); torchvision ``resnet50``: 25,557,032 parameters, 4.09 GMAC at
  224x224 (torchvision model table), i.e. 8.18e9 forward FLOPs per sample.
- ``vgg16``: Simonyan & Zisserman (2015); torchvision ``vgg16``: 138,357,544 parameters,
  15.47 GMAC per 224x224 image (3.094e10 FLOPs).
- ``dlrm``: the TopoOpt configuration (Wang et al., "TopoOpt", NSDI'23, section 6): 64 embedding
  tables of 10^7 rows x 128 dimensions, global batch 65,536. TopoOpt does not list MLP widths; we
  use MLPerf DLRM's (bottom 13-512-256-128, top 1024-1024-512-256-1) with the dot interaction's
  input width 128 + 65*64/2 = 2208.
- ``ncf``: He et al., "Neural Collaborative Filtering" (2017), NeuMF as in the MLPerf reference on
  MovieLens-20M: 138,493 users, 26,744 items, GMF factor 64, MLP layers 256-256-128-64 (user and
  item MLP embeddings of 128), final layer 128 -> 1.
- ``candle-uno``: the CANDLE Uno model as configured in FlexFlow (``get_default_candle_uno_config``,
  the simulator TopoOpt uses): 5 feature encoders (cell RNA-seq 942, 2 x drug descriptors 5270,
  2 x drug fingerprints 2048 inputs) of 8 dense layers of 4192, two dose scalars, then 4 dense
  layers of 4192 and an output of 1, no biases: 820,948,704 parameters, 2 FLOPs per weight per
  sample forward.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from traffic.errors import InputError

__all__ = ["ModelSpec", "TableSpec", "ZOO", "get_model", "zoo_names"]


class TableSpec(BaseModel):
    """``count`` embedding tables of ``rows`` x ``dim`` (recommendation models)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    rows: PositiveInt
    dim: PositiveInt
    count: PositiveInt = 1


class ModelSpec(BaseModel):
    """The shape of one model.

    ``kind`` selects which fields matter:

    - ``transformer``: ``layers``, ``hidden``, ``heads``, ``vocab``, ``seq_len`` (required);
      ``kv_heads`` (default ``heads``), ``head_dim`` (default ``hidden / heads``), ``ffn``
      (default ``4 * hidden``), ``gated_mlp`` (SwiGLU: two input projections), ``norm``,
      ``bias``, ``position`` (the position embedding: ``learned`` absolute positions add
      ``seq_len * hidden`` parameters and, with sequence parallelism, make Megatron all-reduce
      the embedding output instead of reduce-scattering it; ``rope`` and ``none`` add neither),
      ``tied_embeddings``; mixture of experts with ``experts > 1``, ``top_k``, ``moe_ffn``
      (default ``ffn``), ``shared_experts`` (each of width ``moe_ffn``) and ``dense_layers``
      (leading layers with a dense MLP instead of experts).
    - ``recsys``: ``tables`` and ``mlps`` (each MLP a list of widths including its input).
    - ``data_parallel``: ``parameters`` and ``forward_flops_per_sample``.

    ``global_batch`` is the default global batch (sequences or samples) when the plan gives none.

    Examples
    --------
    >>> m = ModelSpec(kind="transformer", layers=2, hidden=64, heads=4, vocab=128, seq_len=32)
    >>> (m.kv_heads, m.head_dim, m.ffn, m.moe_ffn)
    (4, 16, 256, 256)
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = "custom"
    kind: Literal["transformer", "recsys", "data_parallel"] = "transformer"
    source: str = ""
    global_batch: PositiveInt | None = None
    # transformer
    layers: PositiveInt | None = None
    hidden: PositiveInt | None = None
    heads: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    ffn: PositiveInt | None = None
    vocab: PositiveInt | None = None
    seq_len: PositiveInt | None = None
    gated_mlp: bool = False
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    bias: bool = True
    position: Literal["learned", "rope", "none"] = "learned"
    tied_embeddings: bool = True
    experts: PositiveInt = 1
    top_k: PositiveInt = 1
    moe_ffn: PositiveInt | None = None
    shared_experts: int = Field(default=0, ge=0)
    dense_layers: int = Field(default=0, ge=0)
    # recsys
    tables: tuple[TableSpec, ...] = ()
    mlps: tuple[tuple[PositiveInt, ...], ...] = ()
    # data_parallel
    parameters: PositiveInt | None = None
    forward_flops_per_sample: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        d = dict(data)
        if isinstance(d.get("tables"), list):
            d["tables"] = tuple(d["tables"])
        if isinstance(d.get("mlps"), list):
            d["mlps"] = tuple(tuple(x) if isinstance(x, list) else x for x in d["mlps"])
        heads, hidden = d.get("heads"), d.get("hidden")
        ints = isinstance(heads, int) and isinstance(hidden, int) and heads > 0
        if d.get("kv_heads") is None and isinstance(heads, int):
            d["kv_heads"] = heads
        if d.get("head_dim") is None and ints and hidden % heads == 0:
            d["head_dim"] = hidden // heads
        if d.get("ffn") is None and isinstance(hidden, int):
            d["ffn"] = 4 * hidden
        if d.get("moe_ffn") is None and isinstance(d.get("ffn"), int):
            d["moe_ffn"] = d["ffn"]
        return d

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts transformer."""
        return self.kind == "transformer" and self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Number of layers with experts (0 for a dense model)."""
        if not self.is_moe or self.layers is None:
            return 0
        return self.layers - self.dense_layers

    @property
    def kv_dim(self) -> int:
        """``kv_heads * head_dim`` (``h_kv`` in the conventions)."""
        return int(self.kv_heads) * int(self.head_dim)

    @property
    def attn_dim(self) -> int:
        """``heads * head_dim`` (equals ``hidden`` for standard attention)."""
        return int(self.heads) * int(self.head_dim)


def _candle_uno_parameters() -> int:
    width, enc_layers, top_layers = 4192, 8, 4
    inputs = [942, 5270, 2048, 5270, 2048]  # cell.rnaseq, drug1/2 descriptors, fingerprints
    enc = sum(n * width + (enc_layers - 1) * width * width for n in inputs)
    concat = 2 + len(inputs) * width  # two dose scalars pass through
    top = concat * width + (top_layers - 1) * width * width + width * 1
    return enc + top


def _bert_large_forward_flops() -> float:
    l, h, s, v = 24, 1024, 512, 30522
    return float(l * (24 * s * h * h + 4 * s * s * h) + 2 * s * h * v)


ZOO: dict[str, dict[str, Any]] = {
    "gpt3-175b": dict(
        layers=96,
        hidden=12288,
        heads=96,
        vocab=51200,
        seq_len=2048,
        position="learned",
        tied_embeddings=True,
        global_batch=1536,
        source="Brown et al. 2020 Table 2.1; V=51200 and B=1536 from Narayanan et al. SC'21",
    ),
    "llama2-7b": dict(
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=32,
        ffn=11008,
        vocab=32000,
        seq_len=4096,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        source="Touvron et al. 2023 (Llama 2), Table 1 and config.json",
    ),
    "llama2-70b": dict(
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        ffn=28672,
        vocab=32000,
        seq_len=4096,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        source="Touvron et al. 2023 (Llama 2), Table 1 and config.json",
    ),
    "llama3-8b": dict(
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        ffn=14336,
        vocab=128256,
        seq_len=8192,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        source="Llama Team 2024 (The Llama 3 Herd of Models), Table 3",
    ),
    "llama3-70b": dict(
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        ffn=28672,
        vocab=128256,
        seq_len=8192,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        source="Llama Team 2024 (The Llama 3 Herd of Models), Table 3",
    ),
    "llama3-405b": dict(
        layers=126,
        hidden=16384,
        heads=128,
        kv_heads=8,
        ffn=53248,
        vocab=128256,
        seq_len=8192,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        source="Llama Team 2024 (The Llama 3 Herd of Models), Table 3",
    ),
    "mixtral-8x7b": dict(
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        ffn=14336,
        vocab=32000,
        seq_len=32768,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        experts=8,
        top_k=2,
        source="Jiang et al. 2024 (Mixtral of Experts), Table 1",
    ),
    "deepseek-v3": dict(
        layers=61,
        hidden=7168,
        heads=128,
        kv_heads=128,
        head_dim=128,
        ffn=18432,
        moe_ffn=2048,
        vocab=129280,
        seq_len=4096,
        gated_mlp=True,
        norm="rmsnorm",
        bias=False,
        position="rope",
        tied_embeddings=False,
        experts=256,
        top_k=8,
        shared_experts=1,
        dense_layers=3,
        source="DeepSeek-AI 2024 (DeepSeek-V3 report) section 4.2; MLA modelled as MHA",
    ),
    "bert-large": dict(
        kind="data_parallel",
        parameters=335_141_888,
        forward_flops_per_sample=_bert_large_forward_flops(),
        source="Devlin et al. 2019; counted as Hugging Face BertModel (bert-large-uncased)",
    ),
    "resnet50": dict(
        kind="data_parallel",
        parameters=25_557_032,
        forward_flops_per_sample=2 * 4.09e9,
        source="He et al. 2016; torchvision resnet50 (25,557,032 params, 4.09 GMAC)",
    ),
    "vgg16": dict(
        kind="data_parallel",
        parameters=138_357_544,
        forward_flops_per_sample=2 * 15.47e9,
        source="Simonyan & Zisserman 2015; torchvision vgg16 (138,357,544 params, 15.47 GMAC)",
    ),
    "candle-uno": dict(
        kind="data_parallel",
        parameters=_candle_uno_parameters(),
        forward_flops_per_sample=2.0 * _candle_uno_parameters(),
        source="CANDLE Uno as in FlexFlow get_default_candle_uno_config (used by TopoOpt)",
    ),
    "dlrm": dict(
        kind="recsys",
        tables=[dict(rows=10**7, dim=128, count=64)],
        mlps=[[13, 512, 256, 128], [2208, 1024, 1024, 512, 256, 1]],
        global_batch=65536,
        source="TopoOpt (Wang et al. NSDI'23) section 6 tables and batch; MLPerf DLRM MLPs",
    ),
    "ncf": dict(
        kind="recsys",
        tables=[
            dict(rows=138493, dim=64),
            dict(rows=26744, dim=64),
            dict(rows=138493, dim=128),
            dict(rows=26744, dim=128),
        ],
        mlps=[[256, 256, 128, 64], [128, 1]],
        source="He et al. 2017 (NeuMF), MLPerf NCF reference on MovieLens-20M",
    ),
}
"""Raw fields of each named model (see the module docstring for sources)."""


def zoo_names() -> list[str]:
    """Names of the models in the zoo, sorted."""
    return sorted(ZOO)


def get_model(name: str) -> ModelSpec:
    """The validated :class:`ModelSpec` of a zoo model.

    Raises
    ------
    InputError
        When ``name`` is not in the zoo (the message lists the names).

    Examples
    --------
    >>> m = get_model("gpt3-175b")
    >>> (m.layers, m.hidden, m.heads, m.vocab, m.seq_len)
    (96, 12288, 96, 51200, 2048)
    """
    if name not in ZOO:
        raise InputError("model", name, "one of " + ", ".join(zoo_names()))
    return ModelSpec.model_validate({"name": name, **ZOO[name]})
