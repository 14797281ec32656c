"""English and Chinese messages. The language is GPUCTL_LANG, else LANG/LC_ALL (zh* → Chinese)."""

from __future__ import annotations

import os

ZH = {
    "{status}: {percent} %": "{status}：{percent} %",
    "No snapshots. Take one with `gpuctl snapshots create INSTANCE`.": "没有快照。可用 `gpuctl snapshots create 实例` 创建。",
    "Restore {id}? What was written since it was taken is lost.": "恢复 {id}？此后写入的内容将丢失。",
    "Scheduled snapshots are off.": "定时快照已关闭。",
    "Every {hours} h, keeping {keep}; next at {at}.": "每 {hours} 小时一次，保留 {keep} 个；下次于 {at}。",
    "Cloned {source} as {name} ({id}), {price}/h while it runs.": "已克隆 {source} 为 {name}（{id}），运行时每小时 {price}。",
    "Logged in to {url} as {email}.": "已登录 {url}，账号 {email}。",
    "Not logged in: run `gpuctl login --url URL --token TOKEN` (or set GPUCTL_URL and GPUCTL_TOKEN).": "尚未登录：请运行 `gpuctl login --url URL --token TOKEN`（或设置 GPUCTL_URL 和 GPUCTL_TOKEN）。",
    "Launched {name} ({id}); waiting for it to run…": "已创建 {name}（{id}），等待运行…",
    "{name} is running.": "{name} 已运行。",
    "{name} is {status}: {reason}": "{name} 状态为 {status}：{reason}",
    "Gave up waiting after {seconds} s; it is {status}. `gpuctl show {id}` follows it.": "等待 {seconds} 秒后放弃；当前状态 {status}。可用 `gpuctl show {id}` 继续查看。",
    "No instance matches {ref!r}.": "没有与 {ref!r} 匹配的实例。",
    "{ref!r} matches several instances: {ids}. Give more of the id.": "{ref!r} 匹配多个实例：{ids}。请给出更长的 ID。",
    "{name} offers no SSH entry.": "{name} 没有提供 SSH 入口。",
    "{name}: {nodes} nodes, {total} GPUs in all": "{name}：{nodes} 个节点，共 {total} 张 GPU",
    "{name}: waiting in line for cards since {since} (position {n}). `gpuctl leave-queue {name}` leaves.": "{name}：自 {since} 起排队等待 GPU（第 {n} 位）。`gpuctl leave-queue {name}` 可退出排队。",
    "{name} left the line; it stays {status}.": "{name} 已退出排队，保持{status}状态。",
    "{name}: {status}, without GPU": "{name}：{status}，无卡模式",
    "--wait and --no-gpu exclude each other: a start without GPU takes no cards.": "--wait 与 --no-gpu 不能同时使用：无卡模式启动不占用 GPU。",
    "No instances. Launch one with `gpuctl launch`.": "没有实例。可用 `gpuctl launch` 创建。",
    "Deployed {app} ({id}).": "已部署 {app}（{id}）。",
    "API key (shown once): {key}": "API 密钥（只显示一次）：{key}",
    "Base URL: {url}": "接口地址：{url}",
    "Balance": "余额",
    "Status": "状态",
    "Name": "名称",
    "Region": "地区",
    "GPUs": "GPU",
    "Price/h": "每小时",
    "Created": "创建时间",
    "Error": "错误",
    "Time": "时间",
    "The API key was shown in the first answer only.": "API 密钥只在第一次返回中显示。",
    "Open {uri} and check the code {code}.": "请打开 {uri} 并核对验证码 {code}。",
    "The code expired; start again.": "验证码已过期，请重新开始。",
    "Resource": "资源",
    "Description": "说明",
    "Hours": "小时",
    "Amount": "金额",
    "Total": "合计",
    "Used": "已用",
    "Limit": "上限",
    "Change": "变化",
    "Kind": "类型",
    "Reason": "原因",
    "Forgot {name}.": "已删除配置 {name}。",
    "Forwarding {url} → {name}:{port}. Ctrl-C stops.": "正在转发 {url} → {name}:{port}。按 Ctrl-C 停止。",
    "Give one local path and one remote (INSTANCE:PATH or volume/VOLUME:PATH).": "请给出一个本地路径和一个远程路径（实例:路径 或 volume/存储卷:路径）。",
    "No profile {name!r}.": "没有名为 {name!r} 的配置。",
    "No volume matches {ref!r}.": "没有与 {ref!r} 匹配的存储卷。",
    "PORTS is REMOTE or LOCAL:REMOTE, numbers.": "PORTS 应为 远程端口 或 本地端口:远程端口（数字）。",
    "Team": "团队",
    "No saved images. Save one with `gpuctl images save INSTANCE NAME`.": "没有保存的镜像。可用 `gpuctl images save 实例 名称` 保存。",
    "Saving {name}:{tag} ({id})…": "正在保存 {name}:{tag}（{id}）…",
    "Deleted {id}.": "已删除 {id}。",
    "shared": "已共享",
    "Using {name}.": "正在使用 {name}。",
    "Wrote {count} hosts to {path}.": "已将 {count} 个主机写入 {path}。",
    "ssh could not open the forward (exit {code}).": "ssh 无法建立转发（退出码 {code}）。",
    "ssh ended with exit {code}.": "ssh 已退出，退出码 {code}。",
    "{copied} copied ({bytes} bytes), {skipped} already complete.": "已复制 {copied} 个（{bytes} 字节），{skipped} 个已完整。",
    "{name} cannot be reached through the console's SSH gateway now (is it running?).": "现在无法通过控制台的 SSH 网关连接 {name}（它在运行吗？）。",
    "{path}: no such file.": "{path}：没有这个文件。",
    "{ref!r} matches several volumes.": "{ref!r} 匹配多个存储卷。",
    "No secrets. Save one with `gpuctl secrets set NAME`.": "没有密钥。可用 `gpuctl secrets set 名称` 保存。",
    "Bytes": "字节",
    "Updated": "更新时间",
    "Value": "值",
    "Saved {name}.": "已保存 {name}。",
    "Replaced the value of {name}; instances get it at their next start or restart.": "已替换 {name} 的值；实例在下次启动或重启时获得新值。",
    "Deleted {name}.": "已删除 {name}。",
    "  Follows the image contract.": "  符合镜像约定。",
    "  Does not follow the image contract: the console mounts its start script at launch.": "  不符合镜像约定：启动时控制台会挂载它的启动脚本。",
    "No registry logins. Save one with `gpuctl registries login HOST --username NAME`.": "没有镜像仓库登录信息。可用 `gpuctl registries login HOST --username NAME` 保存。",
    "Registry": "镜像仓库",
    "User name": "用户名",
    "Saved the login for {host}.": "已保存 {host} 的登录信息。",
    "No login saved for {host}.": "没有保存 {host} 的登录信息。",
    "Deleted the login for {host}.": "已删除 {host} 的登录信息。",
}


def _chinese() -> bool:
    lang = os.environ.get("GPUCTL_LANG") or os.environ.get("LC_ALL") or os.environ.get("LANG") or ""
    return lang.lower().startswith("zh")


def t(message: str, **values) -> str:
    """The message in the user's language, with ``values`` filled in."""
    text = ZH.get(message, message) if _chinese() else message
    return text.format(**values)
