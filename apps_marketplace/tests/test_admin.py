"""Staff curate the catalogues in the admin: search, filters and editing work on the shipped rows."""

import pytest

from apps_marketplace.models import App, ModelEntry


@pytest.fixture
def staff_client(client_for, staff):
    return client_for(staff)


@pytest.mark.parametrize("name", ["modelentry", "datasetentry", "app"])
def test_the_changelists_search_and_filter(staff_client, catalogue, name):
    response = staff_client.get(f"/admin/apps_marketplace/{name}/", {"q": "qwen"})
    assert response.status_code == 200


def test_the_model_changelist_filters_by_task(staff_client, catalogue):
    response = staff_client.get("/admin/apps_marketplace/modelentry/", {"task__exact": "text-to-image"})
    assert response.status_code == 200
    assert b"stable-diffusion-3-medium" in response.content
    assert b"Meta-Llama-3-8B" not in response.content


def test_staff_can_open_an_entry_and_an_app_to_edit(staff_client, catalogue):
    model = ModelEntry.objects.get(repo_id="THUDM/codegeex4-all-9b")
    assert staff_client.get(f"/admin/apps_marketplace/modelentry/{model.pk}/change/").status_code == 200
    app = App.objects.get(slug="codegeex4-assistant")
    assert staff_client.get(f"/admin/apps_marketplace/app/{app.pk}/change/").status_code == 200


def test_an_app_slug_cannot_shadow_a_catalogue_page(catalogue):
    from django.core.exceptions import ValidationError

    app = App.objects.get(slug="tensorboard")
    app.slug = "models"
    with pytest.raises(ValidationError):
        app.full_clean()


def test_alice_is_not_staff_and_cannot_edit(alice_client, catalogue):
    response = alice_client.get("/admin/apps_marketplace/modelentry/")
    assert response.status_code == 302


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_recommendations", {"meta-llama/Meta-Llama-3-70B-Instruct": ["a800-80g", 3]}),
        ("model_recommendations", {"meta-llama/Meta-Llama-3-70B-Instruct": "a800-80g"}),
        ("precision_flags", {"fp12": "--dtype fp12"}),
    ],
)
def test_malformed_app_settings_are_refused_before_they_reach_a_page(catalogue, field, value):
    from django.core.exceptions import ValidationError

    app = App.objects.get(slug="llama-3-instruct-chat")
    setattr(app, field, value)
    with pytest.raises(ValidationError) as caught:
        app.full_clean()
    assert field in caught.value.message_dict


def test_every_shipped_app_is_valid(catalogue):
    for app in App.objects.all():
        app.full_clean()
