from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def profile(request):
    return render(request, "console/coming_soon.html", {"section": {"title": "Profile", "blurb": ""}})


ssh_keys = api_tokens = profile
