"""The simulated cloud's answer over SSH: a small built-in shell, so the gateway's whole flow (sign-in,
refusals, the session log, a shell and commands) can be tried and tested without a real machine.

It knows a handful of commands (``help`` lists them), says so for any other (exit 127), and has no
files, so sftp and port forwarding are refused with a message rather than pretending.
"""

from __future__ import annotations

import shlex

import asyncssh
from asgiref.sync import sync_to_async
from django.utils import timezone
from django.utils.translation import gettext as _

from instances.models import Instance

CTRL_C, CTRL_D, BACKSPACE, DEL, CR, LF = b"\x03", b"\x04", b"\x08", b"\x7f", b"\r", b"\n"


@sync_to_async
def _facts(instance_id) -> dict:
    instance = Instance.objects.select_related("gpu_model", "image").get(pk=instance_id)
    return {
        "id": str(instance.pk),
        "name": instance.name,
        "gpus": instance.gpu_count,
        "gpu": instance.gpu_model.name,
        "memory_gb": instance.gpu_model.memory_gb,
        "image": instance.image.name,
    }


def answer(command: str, *, facts: dict, user: str) -> tuple[str, int]:
    """The output and exit status of one command line: simple commands joined by ``;`` and ``&&``."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as exc:
        return f"sh: {exc}\n", 2
    output, status, words, skip = [], 0, [], False
    for part in [*tokens, ";"]:
        if part not in (";", "&&"):
            words.append(part)
            continue
        if words and not skip:
            text, status = _simple(words, facts=facts, user=user)
            output.append(text)
        # After "&&" the next command runs only if this one succeeded; ";" always runs it.
        skip = part == "&&" and (status != 0 or skip)
        words = []
    return "".join(output), status


def _simple(words: list[str], *, facts: dict, user: str) -> tuple[str, int]:
    if words[0] in ("|", "||", "&"):
        return "sh: " + _("pipes and background jobs need a real machine") + "\n", 2
    name, args = words[0], words[1:]
    host = f"sim-{facts['id'][:8]}"
    if name == "echo":
        return " ".join(args) + "\n", 0
    if name == "hostname":
        return host + "\n", 0
    if name == "whoami":
        return user + "\n", 0
    if name == "pwd":
        return ("/root" if user == "root" else f"/home/{user}") + "\n", 0
    if name == "uname":
        return ("Linux " + host + " 6.8.0-simulated x86_64 GNU/Linux\n") if "-a" in args else "Linux\n", 0
    if name == "date":
        return timezone.now().strftime("%a %b %d %H:%M:%S UTC %Y") + "\n", 0
    if name == "true":
        return "", 0
    if name == "false":
        return "", 1
    if name == "nvidia-smi":
        rows = "".join(f"GPU {i}: {facts['gpu']} ({facts['memory_gb']} GB, simulated)\n" for i in range(facts["gpus"]))
        return rows, 0
    if name == "help":
        return (
            _("A simulated machine (%(image)s): it runs no real programs.") % {"image": facts["image"]}
            + "\n"
            + _("Commands: echo, hostname, whoami, pwd, uname, date, nvidia-smi, true, false, exit, help")
            + "\n",
            0,
        )
    return f"sh: {name}: " + _("command not found (a simulated machine runs no real programs)") + "\n", 127


async def run(process: asyncssh.SSHServerProcess, *, instance_id, user: str) -> None:
    """Answer one session: a command, an interactive shell, or a refused subsystem."""
    if process.subsystem:
        process.stderr.write(
            (
                _("The simulated cloud has no files: %(subsystem)s needs a real machine.")
                % {"subsystem": process.subsystem}
            ).encode()
            + b"\r\n"
        )
        process.exit(1)
        return
    facts = await _facts(instance_id)
    if process.command is not None:
        output, status = answer(process.command, facts=facts, user=user)
        process.stdout.write(output.encode())
        process.exit(status)
        return
    await _interactive(process, facts=facts, user=user)


async def _interactive(process: asyncssh.SSHServerProcess, *, facts: dict, user: str) -> None:
    """A prompt with echo and backspace (the gateway passes keystrokes raw, with no line editor)."""
    newline = b"\r\n" if process.term_type else b"\n"
    echo = bool(process.term_type)
    prompt = f"{user}@sim-{facts['id'][:8]}:~# ".encode()
    greeting = _("Welcome to %(name)s, a simulated machine. Type help for the commands it knows.") % {
        "name": facts["name"]
    }
    process.stdout.write(greeting.encode() + newline + prompt)
    line = b""
    status = 0
    while True:
        try:
            data = await process.stdin.read(1024)
        except asyncssh.TerminalSizeChanged:
            continue
        except asyncssh.BreakReceived:
            data = CTRL_C
        if not data:
            break
        for byte in (data[i : i + 1] for i in range(len(data))):
            if byte in (CR, LF):
                if echo:
                    process.stdout.write(newline)
                command = line.decode(errors="replace").strip()
                line = b""
                if command in ("exit", "logout"):
                    process.exit(0)
                    return
                output, status = answer(command, facts=facts, user=user)
                process.stdout.write(output.replace("\n", newline.decode()).encode() + prompt)
            elif byte == CTRL_D and not line:
                process.stdout.write(b"logout" + newline)
                process.exit(0)
                return
            elif byte == CTRL_C:
                line = b""
                process.stdout.write(b"^C" + newline + prompt)
            elif byte in (BACKSPACE, DEL):
                if line:
                    line = line[:-1]
                    if echo:
                        process.stdout.write(b"\b \b")
            else:
                line += byte
                if echo:
                    process.stdout.write(byte)
    process.exit(status)
