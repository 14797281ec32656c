"""WebSocket routes. Apps append their consumers here as they gain live views."""

from django.urls import path

from console.consumers import UserEventsConsumer

websocket_urlpatterns = [
    path("ws/events/", UserEventsConsumer.as_asgi()),
]
