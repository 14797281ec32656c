"""The REST API for GPU metrics: one instance's chart series (the page's charts read the same).

In the acting context: any instance the person may see (``teams.access``: VIEW or more; a team's
billing viewer, a former member and a stranger get a 404)."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from instances.selectors import instance_get_for
from metrics import selectors
from metrics.serializers import SeriesSerializer
from teams.access import request_acting, require_access


class InstanceMetricsView(APIView):
    @extend_schema(
        summary="GPU metrics of an instance",
        description=(
            "Per card: utilisation (%), memory used (MiB), power (W) and temperature (°C), averaged (memory and "
            "temperature: the peak) over each step of the range. A point is null where nothing was sampled "
            "(the instance was stopped, or its provider did not answer)."
        ),
        tags=["instances"],
        parameters=[
            OpenApiParameter(
                "range", str, enum=list(selectors.RANGES), default=selectors.DEFAULT_RANGE, description="How far back."
            )
        ],
        responses=SeriesSerializer,
    )
    def get(self, request, pk):
        instance = instance_get_for(user=request_acting(request)[0], instance_id=pk)  # another account's: 404
        require_access(request, owner_id=instance.owner_id, created_by_id=instance.created_by_id)
        range_key = request.query_params.get("range", selectors.DEFAULT_RANGE)
        if range_key not in selectors.RANGES:
            raise ValidationError(
                {"range": [_("Choose one of: %(ranges)s.") % {"ranges": ", ".join(selectors.RANGES)}]}
            )
        series = selectors.instance_series(instance_id=instance.pk, range_key=range_key)
        return Response(SeriesSerializer(series).data)
