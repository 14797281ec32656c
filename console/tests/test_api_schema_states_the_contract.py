"""The schema states what the server enforces: the refusals, the statuses and where a create's result goes next."""

import pytest


@pytest.fixture(scope="module")
def schema():
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


def test_every_operation_taking_an_idempotency_key_documents_its_409(schema):
    taking = [
        (label, operation)
        for label, operation in _operations(schema)
        if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
    ]
    assert "POST /api/v1/teams/{slug}/wallet/transfers/" in dict(taking)
    for label, operation in taking:
        assert "idempotency_key_reused" in operation["responses"]["409"]["description"], label


def test_every_operation_documents_429_with_retry_after(schema):
    for label, operation in _operations(schema):
        assert "Retry-After" in operation["responses"]["429"]["headers"], label


def test_the_files_path_is_required_and_not_blank(schema):
    paths = [
        (label, p)
        for label, operation in _operations(schema)
        for p in operation.get("parameters", [])
        if p["name"] == "path" and p["in"] == "query"
    ]
    assert paths
    for label, parameter in paths:
        assert parameter["required"] is True, label
        assert parameter["schema"]["minLength"] == 1, label


def test_a_create_links_to_the_operations_on_what_it_created(schema):
    links = schema["paths"]["/api/v1/volumes/"]["post"]["responses"]["201"]["links"]
    assert links["v1_volumes_retrieve"]["parameters"] == {"id": "$response.body#/id"}
    assert "v1_volumes_destroy" in links
    teams = schema["paths"]["/api/v1/teams/"]["post"]["responses"]["201"]["links"]
    assert teams["v1_teams_retrieve"]["parameters"] == {"slug": "$response.body#/slug"}
    invitations = schema["paths"]["/api/v1/teams/{slug}/invitations/"]["post"]["responses"]["201"]["links"]
    assert invitations["v1_teams_invitations_revoke_create"]["parameters"]["slug"] == "$request.path.slug"


def test_marking_read_needs_ids_or_all(schema):
    body = schema["paths"]["/api/v1/notifications/read/"]["post"]["requestBody"]
    assert body["required"] is True
    assert {tuple(rule["required"]) for rule in schema["components"]["schemas"]["MarkReadRequest"]["anyOf"]} == {
        ("ids",),
        ("all",),
    }


def test_an_apps_default_model_may_be_null(schema):
    assert schema["components"]["schemas"]["App"]["properties"]["default_model"]["nullable"] is True


def test_a_deployments_model_may_be_null(schema):
    for name in ("Deployment", "DeploymentCreated"):
        assert schema["components"]["schemas"][name]["properties"]["model"]["nullable"] is True, name


def test_the_fit_checks_numbers_have_their_bounds(schema):
    from apps_marketplace import fit

    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/apps/{slug}/fit/"]["get"]["parameters"]}
    assert parameters["concurrency"]["minimum"] == 1
    assert parameters["concurrency"]["maximum"] == fit.MAX_CONCURRENCY
    assert parameters["context_length"]["minimum"] == fit.MIN_CONTEXT_LENGTH


def test_changing_or_removing_a_member_documents_last_owner(schema):
    member = schema["paths"]["/api/v1/teams/{slug}/members/{id}/"]
    for method in ("patch", "delete"):
        assert "last_owner" in member[method]["responses"]["409"]["description"], method
