from django.urls import path, re_path

from billing import views

urlpatterns = [
    path("", views.overview, name="billing"),
    path("transactions/", views.transactions, name="billing_transactions"),
    path("top-up/", views.topup_create, name="billing_topup"),
    path("orders/<int:order_id>/", views.order_detail, name="billing_order"),
    path("trial/claim/", views.trial_claim_view, name="billing_trial_claim"),
    path("statements/", views.statements, name="billing_statements"),
    re_path(r"^statements/(?P<month>[^/]+)\.csv$", views.statement_csv, name="billing_statement_csv"),
    re_path(r"^statements/(?P<month>[^/.]+)/$", views.statement_detail, name="billing_statement"),
    re_path(
        r"^statements/(?P<month>[^/.]+)/(?P<breakdown>members|instances)\.csv$",
        views.statement_breakdown_csv,
        name="billing_statement_breakdown_csv",
    ),
    path("simulated-gateway/<int:order_id>/", views.simulated_checkout, name="billing_simulated_checkout"),
    path("webhooks/<slug:gateway>/", views.webhook, name="billing_webhook"),
]
