"""Will this model fit, on which GPUs, at what price, and how soon is it ready? Pure functions, no database.

The estimate
------------
GPU memory needed = weights + KV cache + activations + runtime overhead::

    weights      = parameters × bytes per parameter (fp32 4, fp16/bf16 2, fp8/int8 1, int4 0.5)
                   + the quantisation overhead: quantised checkpoints keep the embeddings and the output
                   head at 16 bits and store scales (and zeros) per group, so int4 adds 12.5 % and
                   fp8/int8 3 % to the nominal size. Calibrated on published checkpoints:
                   Meta-Llama-3-70B-Instruct-AWQ is 39.8 GB against 35.3 GB nominal, Qwen2.5-72B-Instruct-AWQ
                   41.6 GB against 36.4 GB, Meta-Llama-3-70B-Instruct-FP8 72.7 GB against 70.6 GB.
    KV cache     = 2 (K and V) × layers × KV heads × head dim × KV bytes × tokens
                   tokens = context length × concurrent sequences; KV bytes = 2 (vLLM's default
                   kv_cache_dtype "auto" keeps the cache at the activation dtype, fp16/bf16, even when the
                   weights are fp8 or int4) or 4 for fp32. This is the formula in vLLM's and NVIDIA's
                   sizing guides; e.g. Llama 3 8B (32 layers, 8 KV heads, head dim 128) needs 128 KiB per
                   token, 1 GiB for 8192 tokens.
    activations  = for transformer LLMs, the peak of one prefill step, as vLLM's profiling run measures it:
                   ≈ 12 × hidden size × 2 bytes × min(tokens, 8192) (attention, the MLP's intermediate
                   states and the sampler's workspace); for models without a KV cache (diffusion, speech)
                   20 % of the weights (UNet/DiT activations at 1024 px, VAE decode).
    runtime      = 1 GiB per card: the CUDA context, cuBLAS and NCCL workspaces and captured CUDA graphs.

A card offers ``memory × 0.90`` (vLLM's default ``gpu_memory_utilization``; the rest is left for
fragmentation and other processes). With tensor parallelism across N cards (vLLM
``--tensor-parallel-size N``, Megatron-style) the weights, the KV cache and the activations are split N
ways and every card pays the runtime overhead; the attention heads must divide by N. Engines without
tensor parallelism (ComfyUI, Forge, faster-whisper) run one full copy per card.

Published figures the tests hold this to: Llama 3 8B at fp16 has ≈ 16 GB of weights and fits one 24 GB
card at a short context; Llama 3 70B at fp16 (≈ 141 GB) needs two 80 GB cards; at int4 (≈ 35 GB) it fits
one 48 GB or 80 GB card (Hugging Face's and vLLM's published requirements).

Time to ready
-------------
image pull (compressed image size at ``IMAGE_PULL_BYTES_PER_S``, the in-region registry mirror) + weights
load (size on disk at ``WEIGHTS_LOAD_BYTES_PER_S``, the read-only shared model store) + the engine's own
start-up (CUDA graph capture, compilation). A warm node that has the image cached skips the pull.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from django.utils.translation import gettext as _

GIB = 1024**3
GB = 1000**3

# Widest first: the order precisions are offered in.
BITS_PER_PARAMETER = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
PRECISIONS = tuple(BITS_PER_PARAMETER)
# Extra weight bytes of a quantised checkpoint over its nominal size, per mille (see the module docstring).
QUANTISATION_OVERHEAD_PERMILLE = {"int4": 125, "int8": 30, "fp8": 30}
GPU_MEMORY_UTILIZATION_PERCENT = 90
RUNTIME_OVERHEAD_BYTES = 1 * GIB
ACTIVATION_FACTOR = 12
MAX_PREFILL_TOKENS = 8192
NON_TRANSFORMER_ACTIVATION_PERCENT = 20
CARD_COUNTS = (1, 2, 4, 8)
MAX_CONCURRENCY = 256
MIN_CONTEXT_LENGTH = 128

IMAGE_PULL_BYTES_PER_S = 200 * 1000**2  # 200 MB/s from the in-region registry mirror
WEIGHTS_LOAD_BYTES_PER_S = 1 * GB  # 1 GB/s sustained from the shared NVMe model store


class FitInputError(ValueError):
    """The workload cannot be estimated; ``field`` names the input to correct."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ModelSpec:
    """What the estimate needs to know about a model (a ``ModelEntry`` provides it)."""

    parameter_count: int
    size_bytes: int = 0
    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    max_context_length: int | None = None

    @property
    def has_kv_cache(self) -> bool:
        return bool(self.num_layers and self.num_kv_heads and self.head_dim)


@dataclass(frozen=True)
class Workload:
    precision: str
    context_length: int
    concurrency: int = 1

    @property
    def tokens(self) -> int:
        return self.context_length * self.concurrency


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes for one full copy of the model, split into the parts that tensor parallelism divides."""

    weights: int
    kv_cache: int
    activations: int
    runtime_per_card: int = RUNTIME_OVERHEAD_BYTES

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.runtime_per_card

    def per_card(self, cards: int, *, tensor_parallel: bool) -> int:
        """Bytes each card needs when the model runs on ``cards`` cards."""
        if not tensor_parallel or cards == 1:
            return self.total
        split = self.weights + self.kv_cache + self.activations
        return -(-split // cards) + self.runtime_per_card


@dataclass(frozen=True)
class GpuOffer:
    """A GPU model for rent (an ``instances.models.GpuModel`` provides it); memory in GiB as marketed."""

    slug: str
    name: str
    memory_gb: int
    price_per_card_hour_fen: int


@dataclass(frozen=True)
class FitRow:
    gpu: GpuOffer
    cards: int
    fits: bool
    need_per_card: int
    usable_per_card: int
    price_per_hour_fen: int
    ready_seconds: int
    reason: str = ""
    is_cheapest: bool = False
    is_recommended: bool = False

    @property
    def need_per_card_gib(self) -> float:
        return round(self.need_per_card / GIB, 1)

    @property
    def usable_per_card_gib(self) -> float:
        return round(self.usable_per_card / GIB, 1)

    @property
    def utilisation_percent(self) -> int:
        return min(999, round(100 * self.need_per_card / self.usable_per_card)) if self.usable_per_card else 999


@dataclass(frozen=True)
class FitTable:
    estimate: MemoryEstimate
    rows: list[FitRow] = field(default_factory=list)

    @property
    def cheapest(self) -> FitRow | None:
        return next((row for row in self.rows if row.is_cheapest), None)

    @property
    def recommended(self) -> FitRow | None:
        return next((row for row in self.rows if row.is_recommended), None)

    @property
    def any_fits(self) -> bool:
        return any(row.fits for row in self.rows)


def workload_validate(workload: Workload, model: ModelSpec) -> None:
    """Raise :class:`FitInputError` for a precision, context or concurrency the estimate cannot take."""
    if workload.precision not in BITS_PER_PARAMETER:
        raise FitInputError(
            "precision",
            _("Unknown precision %(precision)s; choose one of %(choices)s.")
            % {"precision": workload.precision, "choices": ", ".join(PRECISIONS)},
        )
    if not isinstance(workload.context_length, int) or workload.context_length < MIN_CONTEXT_LENGTH:
        raise FitInputError(
            "context_length", _("The context length must be at least %(min)d tokens.") % {"min": MIN_CONTEXT_LENGTH}
        )
    if model.max_context_length and workload.context_length > model.max_context_length:
        raise FitInputError(
            "context_length",
            _("This model supports at most %(max)d tokens of context.") % {"max": model.max_context_length},
        )
    if not isinstance(workload.concurrency, int) or not 1 <= workload.concurrency <= MAX_CONCURRENCY:
        raise FitInputError("concurrency", _("Concurrency must be between 1 and %(max)d.") % {"max": MAX_CONCURRENCY})
    if model.parameter_count <= 0:
        raise FitInputError("model", _("The model's parameter count is unknown."))


def weights_bytes(parameter_count: int, precision: str) -> int:
    """The nominal size: ``parameters × bits / 8``, in integer arithmetic."""
    return parameter_count * BITS_PER_PARAMETER[precision] // 8


def loaded_weights_bytes(parameter_count: int, precision: str) -> int:
    """What the weights occupy in GPU memory: the nominal size plus the quantisation overhead."""
    nominal = weights_bytes(parameter_count, precision)
    return nominal * (1000 + QUANTISATION_OVERHEAD_PERMILLE.get(precision, 0)) // 1000


def kv_cache_bytes(model: ModelSpec, workload: Workload) -> int:
    """``2 × layers × KV heads × head dim × KV bytes × tokens``; 0 for models without a KV cache."""
    if not model.has_kv_cache:
        return 0
    kv_bytes = 4 if workload.precision == "fp32" else 2
    return 2 * model.num_layers * model.num_kv_heads * model.head_dim * kv_bytes * workload.tokens


def activation_bytes(model: ModelSpec, workload: Workload, weights: int) -> int:
    if model.has_kv_cache and model.hidden_size:
        act_bytes = 4 if workload.precision == "fp32" else 2
        return ACTIVATION_FACTOR * model.hidden_size * act_bytes * min(workload.tokens, MAX_PREFILL_TOKENS)
    return weights * NON_TRANSFORMER_ACTIVATION_PERCENT // 100


def memory_estimate(model: ModelSpec, workload: Workload) -> MemoryEstimate:
    workload_validate(workload, model)
    weights = loaded_weights_bytes(model.parameter_count, workload.precision)
    return MemoryEstimate(
        weights=weights,
        kv_cache=kv_cache_bytes(model, workload),
        activations=activation_bytes(model, workload, weights),
    )


def usable_bytes_per_card(memory_gb: int) -> int:
    return memory_gb * GIB * GPU_MEMORY_UTILIZATION_PERCENT // 100


def time_to_ready_seconds(*, image_size_bytes: int, weights_on_disk_bytes: int, startup_seconds: int) -> int:
    pull = -(-image_size_bytes // IMAGE_PULL_BYTES_PER_S)
    load = -(-weights_on_disk_bytes // WEIGHTS_LOAD_BYTES_PER_S)
    return pull + load + startup_seconds


def fit_table(
    model: ModelSpec,
    workload: Workload,
    gpus: Iterable[GpuOffer],
    *,
    tensor_parallel: bool,
    image_size_bytes: int = 0,
    startup_seconds: int = 0,
    recommended: tuple[str, int] | None = None,
    card_counts: Sequence[int] = CARD_COUNTS,
) -> FitTable:
    """One row per GPU model and card count: does it fit, what does it cost per hour, when is it ready.

    The cheapest fitting row (ties: fewer cards, then more memory) and the catalogue's recommended
    (GPU, cards) are flagged. Raises :class:`FitInputError` for inputs the estimate cannot take.
    """
    estimate = memory_estimate(model, workload)
    weights_on_disk = model.size_bytes or estimate.weights
    ready = time_to_ready_seconds(
        image_size_bytes=image_size_bytes, weights_on_disk_bytes=weights_on_disk, startup_seconds=startup_seconds
    )
    rows: list[FitRow] = []
    for gpu in gpus:
        usable = usable_bytes_per_card(gpu.memory_gb)
        for cards in card_counts:
            need = estimate.per_card(cards, tensor_parallel=tensor_parallel)
            fits = need <= usable
            reason = ""
            heads = model.num_attention_heads
            if tensor_parallel and cards > 1 and heads and heads % cards:
                fits = False
                reason = _("%(heads)d attention heads do not split evenly across %(cards)d cards.") % {
                    "heads": heads,
                    "cards": cards,
                }
            elif not fits:
                reason = _("Needs %(need).1f GiB per card; %(usable).1f GiB usable.") % {
                    "need": need / GIB,
                    "usable": usable / GIB,
                }
            elif not tensor_parallel and cards > 1:
                reason = _("Each card runs its own full copy (this engine does not split a model).")
            rows.append(
                FitRow(
                    gpu=gpu,
                    cards=cards,
                    fits=fits,
                    need_per_card=need,
                    usable_per_card=usable,
                    price_per_hour_fen=cards * gpu.price_per_card_hour_fen,
                    ready_seconds=ready,
                    reason=reason,
                )
            )
    fitting = [row for row in rows if row.fits]
    if fitting:
        best = min(fitting, key=lambda row: (row.price_per_hour_fen, row.cards, -row.gpu.memory_gb))
        rows = [replace(row, is_cheapest=True) if row is best else row for row in rows]
    if recommended:
        rows = [
            replace(row, is_recommended=True) if (row.gpu.slug, row.cards) == tuple(recommended) else row
            for row in rows
        ]
    return FitTable(estimate=estimate, rows=rows)
