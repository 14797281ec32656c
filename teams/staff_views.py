"""Staff pages for teams: the list of every team. Everyone else gets a 404."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.views import staff_only
from teams.selectors import teams_for_staff

STAFF_TEAMS_PAGE_SIZE = 100


@staff_only
def staff_teams(request: HttpRequest) -> HttpResponse:
    page = Paginator(teams_for_staff(), STAFF_TEAMS_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "teams/staff_teams.html", {"page": page})
