"""The REST API for service ports and share links: the same services and errors as the page.

A field problem is a 400 with ``fields``; another account's instance, port or link is a 404.

In the acting context, as the card (``ports.views``): changes need OPERATE on the instance (its creator,
or a team admin), else a 403 with a message; a viewer sees the ports but not the share links' URLs.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.drf import ServiceError
from instances.models import Instance
from ports import selectors, services
from ports.errors import PortRefused
from ports.models import InstancePort
from ports.serializers import PortCreateSerializer, PortSerializer, ShareCreateSerializer, ShareSerializer
from teams.access import Access, request_acting, require_access


def _check(request, instance: Instance, *, operate: bool) -> bool:
    """404 unless the person may see the instance here; 403 when ``operate`` is asked of a viewer.
    Whether they operate it."""
    access = require_access(
        request,
        owner_id=instance.owner_id,
        created_by_id=instance.created_by_id,
        operate=operate,
        message=_("Only the instance's creator or a team admin can change its ports."),
    )
    return access == Access.OPERATE


def _instance(request, instance_id, *, operate: bool = False) -> Instance:
    instance = selectors.instance_get_for(user=request_acting(request)[0], instance_id=instance_id)
    _check(request, instance, operate=operate)
    return instance


def _port(request, instance_id, port_id, *, operate: bool = False) -> InstancePort:
    port = selectors.port_get_for(user=request_acting(request)[0], instance_id=instance_id, port_id=port_id)
    _check(request, port.instance, operate=operate)
    return port


def _raise(exc: PortRefused):
    if exc.field:
        raise ValidationError({exc.field: [exc.message]}) from exc
    raise ServiceError(detail=exc.message, code=exc.code) from exc


class PortListView(APIView):
    @extend_schema(responses=PortSerializer(many=True), summary="The instance's service ports")
    def get(self, request, instance_id):
        instance = selectors.instance_get_for(user=request_acting(request)[0], instance_id=instance_id)
        can_operate = _check(request, instance, operate=False)
        ports = selectors.ports_for(instance=instance)
        return Response(PortSerializer(ports, many=True, context={"can_operate": can_operate}).data)

    @extend_schema(request=PortCreateSerializer, responses={201: PortSerializer}, summary="Serve a port")
    def post(self, request, instance_id):
        instance = _instance(request, instance_id, operate=True)
        data = PortCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            port = services.port_declare(instance=instance, **data.validated_data)
        except PortRefused as exc:
            _raise(exc)
        return Response(PortSerializer(port).data, status=status.HTTP_201_CREATED)


class PortDetailView(APIView):
    @extend_schema(responses={204: None}, summary="Stop serving a port (its share links go too)")
    def delete(self, request, instance_id, port_id):
        port = _port(request, instance_id, port_id, operate=True)
        services.port_remove(port=port)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ShareCreateView(APIView):
    @extend_schema(request=ShareCreateSerializer, responses={201: ShareSerializer}, summary="Make a share link")
    def post(self, request, instance_id, port_id):
        port = _port(request, instance_id, port_id, operate=True)
        data = ShareCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            share = services.share_create(port=port, actor=request.user, **data.validated_data)
        except PortRefused as exc:
            _raise(exc)
        return Response(ShareSerializer(share).data, status=status.HTTP_201_CREATED)


class ShareRevokeView(APIView):
    @extend_schema(request=None, responses={200: ShareSerializer}, summary="Revoke a share link")
    def post(self, request, instance_id, port_id, share_id):
        port = _port(request, instance_id, port_id, operate=True)
        share = selectors.share_get_for(user=request_acting(request)[0], port=port, share_id=share_id)
        services.share_revoke(share=share)
        share.refresh_from_db()
        return Response(ShareSerializer(share).data)
