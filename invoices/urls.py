from django.urls import path

from invoices import views

urlpatterns = [
    path("", views.invoices, name="invoices"),
    path("<int:invoice_id>/pdf/", views.invoice_pdf, name="invoice_pdf"),
]
