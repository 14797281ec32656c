"""The public model and dataset pages: search, filters, pagination and htmx partials."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse


def test_the_models_page_lists_the_catalogue_with_mount_paths(alice_client, catalogue):
    response = alice_client.get(reverse("apps_models"))
    assert response.status_code == 200
    assert b"/models/" in response.content
    assert f"{catalogue.models} entries".encode() in response.content


def test_search_matches_name_organisation_and_description(alice_client, catalogue):
    by_name = alice_client.get(reverse("apps_models"), {"q": "Coder-32B-Instruct"})
    assert b"Qwen2.5-Coder-32B-Instruct" in by_name.content
    assert b"Meta-Llama-3-8B" not in by_name.content
    by_organisation = alice_client.get(reverse("apps_models"), {"q": "THUDM"})
    assert b"codegeex4-all-9b" in by_organisation.content
    by_description = alice_client.get(reverse("apps_models"), {"q": "fill-in-the-middle"})
    assert b"Qwen2.5-Coder-7B" in by_description.content


def test_several_words_must_all_match(alice_client, catalogue):
    response = alice_client.get(reverse("apps_models"), {"q": "llama 70B instruct"})
    assert b"Meta-Llama-3-70B-Instruct" in response.content
    assert b"Meta-Llama-3-8B-Instruct" not in response.content


def test_filters_narrow_by_task_licence_organisation_and_size(alice_client, catalogue):
    response = alice_client.get(
        reverse("apps_models"),
        {"task": "automatic-speech-recognition", "licence": "apache-2.0", "organisation": "openai", "size": "1-10"},
    )
    content = response.content.decode()
    assert "whisper-large-v3<" in content.replace("</strong>", "<")
    assert "whisper-tiny" not in content  # under 1 GB
    assert "whisper-large-v3-turbo" not in content  # MIT
    assert "faster-whisper" not in content  # another organisation


def test_an_htmx_request_gets_only_the_results(alice_client, catalogue):
    response = alice_client.get(reverse("apps_models"), {"q": "whisper"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert b"whisper-large-v3" in response.content
    assert b'id="catalogue-search"' not in response.content


def test_pages_hold_25_entries_and_link_to_the_next_with_the_filters(alice_client, catalogue):
    response = alice_client.get(reverse("apps_models"), {"task": "text-generation"})
    assert len(response.context["page"].object_list) == 25
    assert b"task=text-generation&amp;page=2" in response.content
    last = alice_client.get(reverse("apps_models"), {"task": "text-generation", "page": "999"})
    assert last.context["page"].number == last.context["page"].paginator.num_pages


def test_a_bad_filter_is_a_form_error_not_a_500(alice_client, catalogue):
    response = alice_client.get(reverse("apps_models"), {"task": "teleportation", "size": "huge"})
    assert response.status_code == 200
    assert response.context["form"].errors.keys() == {"task", "size"}
    assert response.context["page"].paginator.count == 0


def test_the_datasets_page_filters_by_its_own_tasks(alice_client, catalogue):
    response = alice_client.get(reverse("apps_datasets"), {"task": "math"})
    assert b"gsm8k" in response.content
    assert b"/datasets/openai/gsm8k" in response.content
    assert b"librispeech_asr" not in response.content


def test_the_page_query_count_does_not_grow_with_the_rows_shown(alice_client, catalogue):
    with CaptureQueriesContext(connection) as few:
        alice_client.get(reverse("apps_models"), {"q": "whisper-tiny"})
    with CaptureQueriesContext(connection) as many:
        alice_client.get(reverse("apps_models"))
    assert len(many) == len(few) <= 9  # with the header's teams switcher and bell
