"""How the local runtime turns a deployment's command into the process it starts: the backend's
placeholders filled in, and paths on the instance's volumes pointed at where they live on this host."""

from __future__ import annotations

from pathlib import Path

from providers.local.runtime.servers import APP, Paths, app_command, app_program, paths_translate


def test_placeholders_are_filled_and_the_app_gets_its_secret_and_port():
    app = {
        "argv": ["/bin/sh", "-c", "exec tb --host {host} --port {port} --path_prefix {base_path}"],
        "env": [["A", "{port}"]],
    }
    command = app_command(paths=Paths(Path("/srv/i1")), port=24001, base_path="/i/abc/app/", app=app, secret="s3")
    assert command.name == APP
    assert command.argv[2] == "exec tb --host 127.0.0.1 --port 24001 --path_prefix /i/abc/app"
    assert command.env == {"A": "24001", "PORT": "24001", "APP_BASE_PATH": "/i/abc/app", "APP_API_KEY": "s3"}
    assert command.cwd == "/srv/i1/home"


def test_paths_on_a_mount_point_move_to_the_mounts_place_on_this_host_and_others_stay():
    mounts = {"/mnt/data": "/srv/i1/home/mnt/data", "/mnt/data/models": "/srv/i1/home/mnt/data/models"}
    text = "tensorboard --logdir /mnt/data/runs --cache '/mnt/data' --db /mnt/database/x --other /opt/mnt/data"
    assert paths_translate(text, mounts) == (
        "tensorboard --logdir /srv/i1/home/mnt/data/runs --cache '/srv/i1/home/mnt/data' "
        "--db /mnt/database/x --other /opt/mnt/data"
    )
    # The longer mount point wins where both match.
    assert paths_translate(
        "--m=/mnt/data/models/llama", {"/mnt/data": "/A", "/mnt/data/models": "/B"}
    ) == "--m=/mnt/data/models/llama".replace("/mnt/data/models", "/B")
    assert paths_translate("/models/meta-llama/x", {}) == "/models/meta-llama/x"


def test_the_program_of_a_shell_command_is_its_first_real_word():
    assert app_program(["/bin/sh", "-c", "exec env PORT=1 OPENAI=2 bash start.sh"]) == "bash"
    assert app_program(["/bin/sh", "-c", "exec vllm serve /models/x --port 1"]) == "vllm"
    assert app_program(["tensorboard", "--logdir", "x"]) == "tensorboard"
    assert app_program([]) == ""
