"""The REST API's serializers for metrics: what its endpoints take and give."""

from __future__ import annotations

from rest_framework import serializers

from metrics import selectors


class CardSeriesSerializer(serializers.Serializer):
    card = serializers.IntegerField(help_text="The card's position in the instance, from 0.")
    memory_total_mib = serializers.IntegerField(allow_null=True)
    utilization_pct = serializers.ListField(child=serializers.IntegerField(allow_null=True))
    memory_used_mib = serializers.ListField(child=serializers.IntegerField(allow_null=True))
    power_w = serializers.ListField(child=serializers.IntegerField(allow_null=True))
    temperature_c = serializers.ListField(child=serializers.IntegerField(allow_null=True))


class CardProcessSerializer(serializers.Serializer):
    card = serializers.IntegerField(help_text="The card's position in the instance, from 0.")
    pid = serializers.IntegerField(help_text="As the driver sees it (the host's or the container's PID namespace).")
    name = serializers.CharField(help_text="The program; empty where the driver cannot name it.")
    memory_used_mib = serializers.IntegerField(allow_null=True)


class SeriesSerializer(serializers.Serializer):
    range = serializers.ChoiceField(choices=selectors.RANGE_CHOICES)
    step_s = serializers.IntegerField(help_text="Seconds per point.")
    source = serializers.CharField(
        help_text="What the points were computed from: raw (15 s samples) or rollup (5-minute rollups)."
    )
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    t = serializers.ListField(
        child=serializers.IntegerField(), help_text="Each point's start, in UNIX seconds; every series aligns to it."
    )
    cards = CardSeriesSerializer(many=True)
    processes = CardProcessSerializer(many=True, help_text="The processes on the cards now (empty when not listed).")
