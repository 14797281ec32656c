"""The billing REST API (``/api/v1/billing/``): balance, transactions, top-up orders, statements.

Thin: every view calls the selectors and services the pages use, scoped to the account the caller acts
on (``billing.access``: their own, or their team's, by session or by a team's token), so another
account's order or statement is a 404 by construction. In a team, reading needs ``billing.view`` and
topping up is for owners and admins: a role without it gets 403 ``permission_denied``. Amounts are
integer fen (``*_fen``).
"""

from __future__ import annotations

from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from billing import access, selectors
from billing import statements as stmt
from billing.filters import TransactionFilter
from billing.gateways import GatewayError
from billing.models import TopUpOrder, Transaction
from billing.payments import InvalidAmount, topup_order_create
from billing.serializers import (
    BalanceSerializer,
    MonthSummarySerializer,
    StatementSerializer,
    TopUpCreateSerializer,
    TopUpOrderCreatedSerializer,
    TopUpOrderSerializer,
    TransactionSerializer,
)
from core.drf import ServiceError
from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER, idempotent
from identity.errors import RealNameRequired


class GatewayUnavailable(ServiceError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "gateway_unavailable"


# --- Views ----------------------------------------------------------------------------------------


def wallet_of(request, action: str = access.VIEW):
    """The account whose wallet the caller acts on, once their role allows ``action`` (403 otherwise)."""
    if not access.allows(request, action):
        if action == access.PAY:
            raise PermissionDenied(_("Only the team's owners and admins top up its wallet."))
        raise PermissionDenied(_("Your role in this team does not include its billing."))
    return access.principal(request)


class BalanceView(APIView):
    @extend_schema(responses=BalanceSerializer, summary="Balance and runway")
    def get(self, request):
        wallet = wallet_of(request)
        balance = selectors.balance_get(user=wallet)
        runway = selectors.runway_get(user=wallet)
        data = {
            "currency": "CNY",
            "cash_fen": balance.cash,
            "trial_fen": balance.trial,
            "total_fen": balance.total,
            "owed_fen": runway.owed_fen,
            "burn_fen_per_hour": runway.burn_fen_per_hour,
            "runway_seconds": runway.seconds,
        }
        return Response(BalanceSerializer(data).data)


@extend_schema(summary="Transactions")
class TransactionListView(generics.ListAPIView):
    serializer_class = TransactionSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = TransactionFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Transaction.objects.none()
        return selectors.transactions_for(user=wallet_of(self.request))


class TopUpOrderListView(generics.ListAPIView):
    serializer_class = TopUpOrderSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TopUpOrder.objects.none()
        return selectors.topup_orders_for(user=wallet_of(self.request))

    @extend_schema(summary="Top-up orders")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Create a top-up order",
        request=TopUpCreateSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: TopUpOrderCreatedSerializer},
        description="Creates a pending order; send the payer to `checkout_url` (for a QR gateway, that is the "
        "order page, and `checkout_qr` is the code to show). The order is paid when the gateway's signed "
        "notification arrives.",
    )
    @idempotent
    def post(self, request):
        serializer = TopUpCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            order, checkout_url = topup_order_create(
                user=wallet_of(request, access.PAY),
                amount_fen=serializer.validated_data["amount_fen"],
                return_url=request.build_absolute_uri("/billing/orders/{order}/"),
                gateway_name=serializer.validated_data["gateway"],
                payer=request.user,
            )
        except RealNameRequired as exc:
            raise PermissionDenied(exc.message, code=exc.code) from exc
        except InvalidAmount as exc:  # pragma: no cover - the serializer checks first
            raise ServiceError(str(exc), code=exc.code) from exc
        except GatewayError as exc:
            raise GatewayUnavailable(
                _("The payment service is not reachable. Please try again in a few minutes.")
            ) from exc
        order.refresh_from_db()
        data = TopUpOrderCreatedSerializer(
            order, context={"checkout_url": request.build_absolute_uri(checkout_url)}
        ).data
        return Response(data, status=status.HTTP_201_CREATED)


@extend_schema(summary="A top-up order")
class TopUpOrderDetailView(generics.RetrieveAPIView):
    serializer_class = TopUpOrderSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TopUpOrder.objects.none()
        return selectors.topup_orders_for(user=wallet_of(self.request))


class StatementListView(APIView):
    @extend_schema(
        summary="Statements",
        operation_id="v1_billing_statements_list",
        responses=inline_serializer("StatementMonths", {"results": MonthSummarySerializer(many=True)}),
    )
    def get(self, request):
        months = stmt.statement_months(user=wallet_of(request))
        return Response({"results": MonthSummarySerializer(months, many=True).data})


class StatementDetailView(APIView):
    @extend_schema(
        summary="A monthly statement, itemised",
        parameters=[OpenApiParameter("month", OpenApiTypes.STR, OpenApiParameter.PATH, description="YYYY-MM")],
        responses=StatementSerializer,
    )
    def get(self, request, month: str):
        parsed = stmt.month_parse(month)
        if parsed is None or parsed > timezone.localdate(timezone.now(), timezone.get_default_timezone()).replace(
            day=1
        ):
            raise Http404
        statement = stmt.statement_get(user=wallet_of(request), month=parsed)
        return Response(StatementSerializer(statement).data)
