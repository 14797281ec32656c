from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.utils.csp import CSP
from django.views.decorators.csp import csp_override
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from console import prometheus, views
from core.drf import json_not_found
from identity import views as identity_views
from privacy import urls as privacy_urls

# No URL of the apps' matches two routes (console/tests/test_urls_do_not_depend_on_order.py), so the order
# below is free, with two deliberate exceptions: the console's log-in before the admin's own, and the API's
# JSON 404 (``^api/``) last.
api_v1 = [
    path("account/device/", include("devicelogin.api_urls")),
    path("account/", include("accounts.api_urls")),
    path("billing/", include("billing.api_urls")),
    path("", include("apps_marketplace.api_urls")),  # apps/, models/, datasets/
    path("", include("gateway.api_urls")),  # instances/<id>/files/
    path("", include("ports.api_urls")),  # instances/<id>/ports/
    path("", include("metrics.api_urls")),  # instances/<id>/metrics/
    path("", include("instances.api_urls")),
    path("", include("storage.api_urls")),  # volumes/
    path("", include("vault.api_urls")),  # secrets/
    path("teams/", include("teams.api_urls")),
    path("", include("notifications.api_urls")),  # notifications/, notifications/preferences/, …/webhooks/
]

# Redoc writes its styles as <style> elements (styled-components) and searches in a blob: worker; its
# page shows only the API's own schema, so it alone relaxes the console's policy that far.
REDOC_CSP = {
    **settings.SECURE_CSP,
    "style-src-elem": [CSP.SELF, CSP.UNSAFE_INLINE],
    "worker-src": [CSP.SELF, "blob:"],
}


def dev_urlpatterns() -> list:
    """Development's pages (the local mailbox): not routed at all in production, and in other
    environments each view still answers 404 unless DEBUG or ``CONSOLE_ENV=development``."""
    if settings.PRODUCTION:
        return []
    return [
        path("dev/mail/", views.dev_mailbox, name="dev_mailbox"),
        path("dev/mail/<str:key>/", views.dev_mail, name="dev_mail"),
        path("dev/texts/", identity_views.dev_texts_inbox, name="dev_texts"),  # the texts inbox (identity/sms/dev.py)
    ]


urlpatterns = [
    path("", views.home, name="home"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("open/", views.proxy_open, name="proxy_open"),  # settings.CONSOLE_PROXY_HANDOFF_PATH
    path("healthz", views.healthz, name="healthz"),  # liveness
    path("readyz", views.readyz, name="readyz"),  # readiness
    path("metrics", prometheus.metrics_view, name="console_metrics"),  # Prometheus; token or internal address
    path("api/v1/", include(api_v1)),  # early: the API's calls are the most frequent, and resolved in order
    path("admin/login/", views.admin_login, name="admin_login"),  # before the admin's own: the console's log-in
    path("admin/", admin.site.urls),
    path("staff/billing/", include("billing.staff_urls")),
    path("staff/invoices/", include("invoices.staff_urls")),
    path("staff/fleet/", include("instances.staff_urls")),
    path("staff/reservations/", include("instances.reservation_staff_urls")),
    path("staff/teams/", include("teams.staff_urls")),
    path("staff/identity/", include("identity.staff_urls")),
    path("staff/privacy/", include(privacy_urls.staff_urlpatterns)),
    path("legal/", include(privacy_urls.legal_urlpatterns)),  # the terms, the privacy policy, accepting them
    path("accounts/phone/", include("identity.auth_urls")),  # before allauth's: log in by mobile number
    path("accounts/", include("accounts.auth_urls")),
    path("account/device/", include("devicelogin.urls")),
    path("account/identity/", include("identity.urls")),
    path("account/data/", include("privacy.urls")),  # before the accounts app's own
    path("account/", include("accounts.urls")),
    path("billing/invoices/", include("invoices.urls")),
    path("billing/budget/", include("budgets.urls")),
    path("billing/", include("billing.urls")),
    path("apps/", include("apps_marketplace.urls")),
    path("instances/", include("gateway.urls")),  # <id>/files/
    path("instances/", include("ports.urls")),  # <id>/ports/…
    path("instances/", include("instances.urls")),
    path("quota/", include("instances.quota_urls")),
    path("storage/", include("storage.urls")),
    path("secrets/", include("vault.urls")),
    path("teams/", include("teams.urls")),
    path("notifications/", include("notifications.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI's start-up script as a file of its own (?script), not inline: SECURE_CSP allows none.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", csp_override(REDOC_CSP)(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    re_path(r"^api/", json_not_found),
    *dev_urlpatterns(),
]
