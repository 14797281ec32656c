URL = "/api/v1/account/profile/"


def test_alice_reads_her_profile(alice_client):
    body = alice_client.get(URL).json()
    assert body["email"] == "alice@example.com"
    assert body["display_name"] == "Alice"


def test_alice_changes_her_display_name_but_not_her_email(alice, alice_client):
    response = alice_client.patch(
        URL, {"display_name": "  Alice   Liddell ", "email": "evil@example.com"}, content_type="application/json"
    )
    assert response.status_code == 200
    alice.refresh_from_db()
    assert alice.display_name == "Alice Liddell"
    assert alice.email == "alice@example.com"
    assert response.json()["display_name"] == "Alice Liddell"


def test_the_profile_page_saves_the_display_name(alice, alice_client):
    page = alice_client.get("/account/").content.decode()
    assert "alice@example.com" in page
    response = alice_client.post("/account/", {"display_name": "Al"}, follow=True)
    assert "Your profile is saved." in response.content.decode()
    alice.refresh_from_db()
    assert alice.display_name == "Al"
    assert "Welcome, Al" in alice_client.get("/dashboard/").content.decode()
