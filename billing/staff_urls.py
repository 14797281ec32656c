from django.urls import path

from billing import staff_views

urlpatterns = [
    path("", staff_views.staff_billing, name="staff_billing"),
    path("refunds/", staff_views.staff_refunds, name="staff_refunds"),
    path("ledger-check/", staff_views.staff_ledger_check_run, name="staff_ledger_check_run"),
]
