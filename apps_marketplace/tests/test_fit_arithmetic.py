"""The fit estimate against published memory requirements, and its edge cases."""

import pytest

from apps_marketplace import fit
from apps_marketplace.fit import GIB, FitInputError, GpuOffer, ModelSpec, Workload, fit_table, memory_estimate

LLAMA3_8B = ModelSpec(
    parameter_count=8_030_000_000,
    size_bytes=16_100_000_000,
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    head_dim=128,
    max_context_length=8192,
)
LLAMA3_70B = ModelSpec(
    parameter_count=70_600_000_000,
    size_bytes=141_100_000_000,
    num_layers=80,
    hidden_size=8192,
    num_attention_heads=64,
    num_kv_heads=8,
    head_dim=128,
    max_context_length=8192,
)
SDXL = ModelSpec(parameter_count=3_470_000_000, size_bytes=6_940_000_000)

RTX_4090 = GpuOffer("rtx-4090", "RTX 4090 24GB", 24, 198)
A100_40 = GpuOffer("a100-40g", "A100 40GB", 40, 360)
L40S = GpuOffer("l40s", "L40S 48GB", 48, 260)
A800_80 = GpuOffer("a800-80g", "A800 80GB", 80, 190)
H800_80 = GpuOffer("h800", "H800 80GB", 80, 1190)
GPUS = [RTX_4090, A100_40, L40S, A800_80, H800_80]


def row(table, slug, cards):
    return next(r for r in table.rows if r.gpu.slug == slug and r.cards == cards)


def test_weights_are_parameters_times_bytes_per_parameter():
    assert fit.weights_bytes(8_030_000_000, "fp16") == 16_060_000_000  # ≈ 16 GB, as Meta publishes
    assert fit.weights_bytes(8_030_000_000, "bf16") == 16_060_000_000
    assert fit.weights_bytes(8_030_000_000, "fp32") == 32_120_000_000
    assert fit.weights_bytes(8_030_000_000, "fp8") == fit.weights_bytes(8_030_000_000, "int8") == 8_030_000_000
    assert fit.weights_bytes(70_600_000_000, "int4") == 35_300_000_000  # ≈ 35 GB
    assert fit.weights_bytes(70_600_000_000, "fp16") == 141_200_000_000  # ≈ 140 GB


def test_quantised_weights_carry_the_overhead_published_checkpoints_show():
    # Meta-Llama-3-70B-Instruct-AWQ is 39.8 GB on Hugging Face; 35.3 GB nominal + 12.5 % = 39.7 GB.
    assert fit.loaded_weights_bytes(70_600_000_000, "int4") == 39_712_500_000
    assert fit.loaded_weights_bytes(70_600_000_000, "fp8") == 72_718_000_000
    assert fit.loaded_weights_bytes(8_030_000_000, "bf16") == fit.weights_bytes(8_030_000_000, "bf16")


def test_the_kv_cache_is_128_kib_per_token_for_llama_3_8b():
    one_token = fit.kv_cache_bytes(LLAMA3_8B, Workload("fp16", 1))
    assert one_token == 2 * 32 * 8 * 128 * 2 == 128 * 1024
    assert fit.kv_cache_bytes(LLAMA3_8B, Workload("fp16", 8192)) == 1 * GIB
    assert fit.kv_cache_bytes(LLAMA3_8B, Workload("fp16", 8192, concurrency=4)) == 4 * GIB
    # int4 weights keep a 16-bit cache (vLLM's kv_cache_dtype "auto").
    assert fit.kv_cache_bytes(LLAMA3_8B, Workload("int4", 8192)) == 1 * GIB


def test_llama_3_8b_at_fp16_fits_one_24_gb_card_at_a_short_context():
    table = fit_table(LLAMA3_8B, Workload("fp16", 4096), GPUS, tensor_parallel=True)
    assert row(table, "rtx-4090", 1).fits
    assert 16 * GIB < row(table, "rtx-4090", 1).need_per_card < 24 * GIB * 90 // 100


def test_llama_3_8b_with_many_long_requests_outgrows_one_24_gb_card():
    table = fit_table(LLAMA3_8B, Workload("fp16", 8192, concurrency=8), GPUS, tensor_parallel=True)
    assert not row(table, "rtx-4090", 1).fits
    assert row(table, "rtx-4090", 2).fits


def test_llama_3_70b_at_fp16_needs_two_80_gb_cards():
    table = fit_table(LLAMA3_70B, Workload("fp16", 4096), GPUS, tensor_parallel=True)
    assert not row(table, "a800-80g", 1).fits
    assert row(table, "a800-80g", 2).fits
    assert not row(table, "a100-40g", 2).fits
    assert row(table, "a100-40g", 4).fits


def test_llama_3_70b_at_int4_fits_one_48_or_80_gb_card_but_not_40():
    table = fit_table(LLAMA3_70B, Workload("int4", 4096), GPUS, tensor_parallel=True)
    assert row(table, "l40s", 1).fits
    assert row(table, "a800-80g", 1).fits
    assert not row(table, "a100-40g", 1).fits
    assert not row(table, "rtx-4090", 1).fits


def test_tensor_parallelism_splits_the_model_and_charges_runtime_on_every_card():
    estimate = memory_estimate(LLAMA3_70B, Workload("fp16", 4096))
    split = estimate.weights + estimate.kv_cache + estimate.activations
    assert estimate.per_card(1, tensor_parallel=True) == split + fit.RUNTIME_OVERHEAD_BYTES
    assert estimate.per_card(4, tensor_parallel=True) == -(-split // 4) + fit.RUNTIME_OVERHEAD_BYTES
    assert estimate.per_card(4, tensor_parallel=False) == estimate.total


def test_an_engine_without_tensor_parallelism_gains_no_memory_from_more_cards():
    table = fit_table(SDXL, Workload("fp16", 2048), [RTX_4090], tensor_parallel=False)
    assert {r.need_per_card for r in table.rows} == {table.estimate.total}
    assert "full copy" in row(table, "rtx-4090", 2).reason


def test_attention_heads_must_divide_by_the_card_count():
    falcon_like = ModelSpec(
        parameter_count=7_220_000_000,
        num_layers=32,
        hidden_size=4544,
        num_attention_heads=71,
        num_kv_heads=1,
        head_dim=64,
    )
    table = fit_table(falcon_like, Workload("fp16", 2048), [A800_80], tensor_parallel=True)
    assert row(table, "a800-80g", 1).fits
    assert not row(table, "a800-80g", 2).fits
    assert "71 attention heads" in row(table, "a800-80g", 2).reason


def test_the_hourly_price_is_cards_times_the_card_price_in_fen():
    table = fit_table(LLAMA3_8B, Workload("bf16", 4096), GPUS, tensor_parallel=True)
    assert row(table, "h800", 8).price_per_hour_fen == 8 * 1190
    assert isinstance(row(table, "h800", 8).price_per_hour_fen, int)


def test_the_cheapest_fitting_row_and_the_recommended_row_are_flagged_once():
    table = fit_table(LLAMA3_70B, Workload("fp16", 4096), GPUS, tensor_parallel=True, recommended=("a800-80g", 2))
    assert [(r.gpu.slug, r.cards) for r in table.rows if r.is_cheapest] == [("a800-80g", 2)]
    assert [(r.gpu.slug, r.cards) for r in table.rows if r.is_recommended] == [("a800-80g", 2)]
    cheapest = table.cheapest
    assert all(r.price_per_hour_fen >= cheapest.price_per_hour_fen for r in table.rows if r.fits)


def test_nothing_is_cheapest_when_nothing_fits():
    table = fit_table(LLAMA3_70B, Workload("fp16", 4096), [RTX_4090], tensor_parallel=True, card_counts=(1, 2))
    assert not table.any_fits and table.cheapest is None


def test_time_to_ready_is_pull_plus_load_plus_start_up():
    assert (
        fit.time_to_ready_seconds(
            image_size_bytes=10_000_000_000, weights_on_disk_bytes=16_100_000_000, startup_seconds=60
        )
        == 50 + 17 + 60
    )
    table = fit_table(
        LLAMA3_8B,
        Workload("fp16", 4096),
        [RTX_4090],
        tensor_parallel=True,
        image_size_bytes=10_000_000_000,
        startup_seconds=60,
    )
    assert {r.ready_seconds for r in table.rows} == {127}


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        (Workload("fp12", 4096), "precision"),
        (Workload("fp16", 0), "context_length"),
        (Workload("fp16", 16384), "context_length"),  # Llama 3 stops at 8192
        (Workload("fp16", 4096, concurrency=0), "concurrency"),
        (Workload("fp16", 4096, concurrency=10_000), "concurrency"),
    ],
)
def test_bad_inputs_name_the_field_to_correct(workload, field):
    with pytest.raises(FitInputError) as caught:
        memory_estimate(LLAMA3_8B, workload)
    assert caught.value.field == field


def test_a_model_without_a_parameter_count_cannot_be_estimated():
    with pytest.raises(FitInputError):
        memory_estimate(ModelSpec(parameter_count=0), Workload("fp16", 2048))
