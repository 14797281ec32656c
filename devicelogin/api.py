"""``/api/v1/account/device/``: start a device log-in, then poll for its token (no credentials needed).

Refusals use the API's error format: an unknown or spent device code is a 404; "not yet", "refused"
and "expired" are 409s whose ``code`` is RFC 8628's (``authorization_pending``, ``access_denied``,
``expired_token``), so a poller loops on the first and stops on the others.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.client import request_client
from core.drf import ServiceError
from devicelogin import services
from devicelogin.serializers import StartedSerializer, StartSerializer, TokenRequestSerializer, TokenSerializer


class DeviceStartView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Start a device log-in (for a command line)",
        tags=["account"],
        request=StartSerializer,
        responses={201: StartedSerializer},
    )
    def post(self, request):
        body = StartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        authorization, device_code = services.device_login_start(
            client_name=body.validated_data["client_name"], scope=body.validated_data["scope"]
        )
        page = request.build_absolute_uri(reverse("device_login"))
        data = {
            "device_code": device_code,
            "user_code": authorization.user_code,
            "verification_uri": page,
            "verification_uri_complete": f"{page}?code={authorization.user_code}",
            "expires_in": int(services.LIFETIME.total_seconds()),
            "interval": services.POLL_INTERVAL_S,
        }
        return Response(StartedSerializer(data).data, status=status.HTTP_201_CREATED)


class DeviceTokenView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Poll for the token of a device log-in",
        tags=["account"],
        request=TokenRequestSerializer,
        responses={
            200: TokenSerializer,
            404: OpenApiResponse(description="Unknown or already used device code"),
            409: OpenApiResponse(
                description="authorization_pending, access_denied, expired_token or limit_reached (the most API "
                "tokens allowed)"
            ),
        },
    )
    def post(self, request):
        body = TokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            token = services.device_login_redeem(
                device_code=body.validated_data["device_code"], **request_client(request)
            )
        except services.DeviceLoginRefused as refused:
            if refused.code == "not_found":
                raise NotFound(refused.message) from refused
            raise ServiceError(detail=refused.message, code=refused.code) from refused
        return Response({"token": token})
