"""An app's parameters: types, defaults and validation, and the start command they render."""

import pytest
from django.core.exceptions import ValidationError

from apps_marketplace.models import App, ModelEntry
from apps_marketplace.parameters import app_command_render, app_parameters_clean


@pytest.fixture
def llama_app(catalogue):
    return App.objects.get(slug="llama-3-instruct-chat")


def test_defaults_fill_in_and_the_model_path_follows_the_model(llama_app):
    model = ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-70B-Instruct")
    cleaned = app_parameters_clean(app=llama_app, values={}, model=model)
    assert cleaned == {
        "model_path": "meta-llama/Meta-Llama-3-70B-Instruct",
        "precision": "bf16",
        "context_length": 8192,
    }


def test_values_are_coerced_and_checked(llama_app):
    cleaned = app_parameters_clean(
        app=llama_app, values={"model_path": "/mnt/data/ckpt/final", "precision": "fp8", "context_length": "4096"}
    )
    assert cleaned["context_length"] == 4096 and cleaned["model_path"] == "/mnt/data/ckpt/final"


@pytest.mark.parametrize(
    ("values", "bad"),
    [
        ({"precision": "fp12"}, "precision"),
        ({"context_length": "100"}, "context_length"),
        ({"context_length": "10000000"}, "context_length"),
        ({"context_length": "many"}, "context_length"),
        ({"model_path": "meta-llama/x; rm -rf /"}, "model_path"),
        ({"model_path": "/mnt/data/../../etc"}, "model_path"),
        ({"model_path": "not a repo"}, "model_path"),
        ({"gpu_memory_utilization": "1.0"}, "gpu_memory_utilization"),
    ],
)
def test_bad_values_are_refused_by_key(llama_app, values, bad):
    values = {"model_path": "meta-llama/Meta-Llama-3-8B-Instruct", **values}
    with pytest.raises(ValidationError) as caught:
        app_parameters_clean(app=llama_app, values=values)
    assert bad in caught.value.message_dict


def test_the_command_uses_the_read_only_mount_and_the_precision_flags(llama_app):
    cleaned = app_parameters_clean(
        app=llama_app, values={"model_path": "meta-llama/Meta-Llama-3-8B-Instruct", "precision": "fp8"}
    )
    command, webui = app_command_render(app=llama_app, values=cleaned, api_key="sk-test", tensor_parallel_size=2)
    assert command == (
        "vllm serve /models/meta-llama/Meta-Llama-3-8B-Instruct --host 0.0.0.0 --port 8000 "
        "--served-model-name meta-llama/Meta-Llama-3-8B-Instruct --max-model-len 8192 --tensor-parallel-size 2 "
        "--gpu-memory-utilization 0.90 --dtype bfloat16 --quantization fp8 --api-key sk-test"
    )
    assert "OPENAI_API_BASE_URL=http://127.0.0.1:8000/v1" in webui and "PORT=8080" in webui


def test_every_shipped_app_renders_its_commands_from_its_defaults(catalogue):
    for app in App.objects.prefetch_related("parameters").select_related("default_model"):
        cleaned = app_parameters_clean(app=app, values={}, model=app.default_model)
        command, _webui = app_command_render(app=app, values=cleaned)
        assert "{" not in command and str(app.port) in command, app.slug
