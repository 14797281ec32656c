"""The app catalogue index and an app's page: categories, search, the fit table and the deploy note."""

from django.urls import reverse


def test_the_nav_entry_opens_the_catalogue_not_coming_soon(alice_client, catalogue):
    response = alice_client.get(reverse("apps"))
    assert response.status_code == 200
    assert reverse("apps") == "/apps/"
    assert b"coming soon" not in response.content
    for name in (b"Llama 3 Instruct chat", b"Qwen2.5-Coder assistant", b"CodeGeeX4 assistant", b"TensorBoard"):
        assert name in response.content


def test_categories_and_search_filter_the_grid_with_an_htmx_partial(alice_client, catalogue):
    response = alice_client.get(reverse("apps"), {"category": "image-generation"}, headers={"HX-Request": "true"})
    assert b"<html" not in response.content
    assert b"Stable Diffusion 3 Medium" in response.content and b"SDXL" in response.content
    assert b"Whisper" not in response.content
    searched = alice_client.get(reverse("apps"), {"q": "whisper"})
    assert [app.slug for app in searched.context["apps"]] == ["whisper-speech-to-text"]


def test_the_app_page_shows_the_fit_table_for_the_default_model(alice_client, catalogue):
    response = alice_client.get(reverse("apps_detail", args=["llama-3-instruct-chat"]))
    assert response.status_code == 200
    table = response.context["table"]
    assert table is not None and table.any_fits
    assert {row.cards for row in table.rows} == {1, 2, 4, 8}
    assert b"Cheapest" in response.content and b"Recommended" in response.content
    assert "¥".encode() in response.content
    assert b"vllm serve /models/meta-llama/Meta-Llama-3-8B-Instruct" in response.content
    assert b"--max-model-len 8192" in response.content


def test_changing_the_inputs_returns_only_the_new_fit_table(alice_client, catalogue):
    response = alice_client.get(
        reverse("apps_detail", args=["llama-3-instruct-chat"]),
        {
            "model": "meta-llama/Meta-Llama-3-70B-Instruct",
            "precision": "fp16",
            "context_length": "4096",
            "concurrency": "1",
        },
        headers={"HX-Request": "true"},
    )
    assert b"<html" not in response.content
    table = response.context["table"]
    fitting = {(row.gpu.slug, row.cards) for row in table.rows if row.fits}
    assert ("a800-80g", 1) not in fitting and ("a800-80g", 2) in fitting
    assert b"--tensor-parallel-size 2" in response.content  # the cheapest fit is 2 x A800


def test_the_deploy_form_is_preselected_from_the_fit_check(alice_client, catalogue):
    response = alice_client.get(
        reverse("apps_detail", args=["llama-3-instruct-chat"]), {"model": "meta-llama/Meta-Llama-3-70B-Instruct"}
    )
    form = response.context["deploy_form"]
    table = response.context["table"]
    row = table.recommended if table.recommended and table.recommended.fits else table.cheapest
    assert (form.initial["gpu_model"], form.initial["gpu_count"]) == (row.gpu.slug, row.cards)
    assert form.initial["model"] == "meta-llama/Meta-Llama-3-70B-Instruct"
    assert response.context["deploy_price"] == row.price_per_hour_fen
    assert b'action="/apps/llama-3-instruct-chat/deploy/"' in response.content


def test_bad_fit_inputs_are_form_errors_not_a_500(alice_client, catalogue):
    url = reverse("apps_detail", args=["llama-3-instruct-chat"])
    response = alice_client.get(
        url, {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "precision": "fp3", "context_length": "abc"}
    )
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"precision", "context_length"}
    assert response.context["table"] is None
    too_long = alice_client.get(
        url, {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "precision": "bf16", "context_length": "65536"}
    )
    assert "context_length" in too_long.context["form"].errors  # Llama 3 stops at 8192
    other_app_model = alice_client.get(url, {"model": "openai/whisper-large-v3", "precision": "bf16"})
    assert "model" in other_app_model.context["form"].errors


def test_a_tool_app_says_it_needs_no_gpu_memory(alice_client, catalogue):
    response = alice_client.get(reverse("apps_detail", args=["tensorboard"]))
    assert response.status_code == 200
    assert response.context["table"] is None
    assert b"tensorboard --logdir /mnt/data/runs --host 0.0.0.0 --port 6006" in response.content


def test_an_unknown_app_is_a_404(alice_client, catalogue):
    assert alice_client.get("/apps/no-such-app/").status_code == 404


def test_partial_inputs_take_the_apps_defaults(alice_client, catalogue):
    response = alice_client.get(reverse("apps_detail", args=["qwen-chat"]), {"precision": "fp8"})
    assert not response.context["form"].errors
    assert response.context["form"].cleaned_data["model"].repo_id == "Qwen/Qwen2.5-7B-Instruct"


def test_the_page_lists_memory_for_every_model_at_every_precision(alice_client, catalogue):
    response = alice_client.get(reverse("apps_detail", args=["llama-3-instruct-chat"]))
    matrix = response.context["memory_matrix"]
    assert matrix["precisions"] == ["bf16", "fp16", "fp8", "int4"]
    rows = {row["model"].repo_id: row["cells"] for row in matrix["rows"]}
    bf16, _fp16, fp8, int4 = rows["meta-llama/Meta-Llama-3-70B-Instruct"]
    assert bf16 > fp8 > int4
    assert b"GPU memory by model and precision" in response.content


def test_the_app_page_keeps_a_query_budget(alice_client, catalogue, django_assert_max_num_queries):
    # The fit check's 10, plus the Deploy form's model, region and GPU choice lists, its default region
    # and the user's volumes it may mount; the header's teams switcher.
    with django_assert_max_num_queries(16):
        alice_client.get(reverse("apps_detail", args=["llama-3-instruct-chat"]))


def test_an_image_app_ignores_context_inputs_it_does_not_use(alice_client, catalogue):
    response = alice_client.get(reverse("apps_detail", args=["sd3-medium-comfyui"]), {"context_length": "abc"})
    assert not response.context["form"].errors
    assert response.context["table"].any_fits


def test_errors_are_labelled_for_people(alice_client, catalogue):
    response = alice_client.get(reverse("apps_detail", args=["llama-3-instruct-chat"]), {"concurrency": "0"})
    assert b"<strong>Concurrent requests</strong>" in response.content
