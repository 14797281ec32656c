from django.urls import path

from billing import api

urlpatterns = [
    path("balance/", api.BalanceView.as_view(), name="api_billing_balance"),
    path("transactions/", api.TransactionListView.as_view(), name="api_billing_transactions"),
    path("orders/", api.TopUpOrderListView.as_view(), name="api_billing_orders"),
    path("orders/<int:pk>/", api.TopUpOrderDetailView.as_view(), name="api_billing_order"),
    path("statements/", api.StatementListView.as_view(), name="api_billing_statements"),
    path("statements/<str:month>/", api.StatementDetailView.as_view(), name="api_billing_statement"),
]
