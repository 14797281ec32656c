// The file browser of an instance's disk or a volume (templates/files/_browser.html): uploads in chunks through the files API
// with a progress bar, resuming after a dropped connection; delete and new folder. Plain JavaScript: the
// listing itself is server-rendered and reloaded with htmx after each change.
//
// Resuming: each chunk is a PUT at an offset. When a request fails (the network dropped, the answer was
// lost), the file's size on the instance is asked with stat and the upload continues from there, so a
// chunk that arrived but whose answer was lost is not sent twice. An upload cut by a reload is remembered
// in localStorage (path, size, last-modified): picking the same file again resumes it instead of
// starting over.
(function () {
  "use strict";
  const root = document.getElementById("files");
  if (!root) return;
  const strings = JSON.parse(document.getElementById("files-strings").textContent);
  const chunk = parseInt(root.dataset.chunk, 10);
  const api = { files: root.dataset.apiFiles, stat: root.dataset.apiStat, folder: root.dataset.apiFolder, content: root.dataset.apiContent };
  const message = document.getElementById("files-message");
  const progress = document.getElementById("files-progress");
  const bar = document.getElementById("files-progress-bar");
  const barText = document.getElementById("files-progress-text");
  const RETRIES = 8;
  const STORE = "files-upload:";

  function say(template, values) {
    return template.replace(/%\((\w+)\)s/g, (_, key) => (values && key in values ? values[key] : ""));
  }
  function show(text, kind) {
    message.textContent = text;
    message.className = "alert " + (kind || "info");
    message.hidden = !text;
  }
  function human(bytes) {
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0, n = bytes;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }
  function currentPath() {
    const listing = document.getElementById("files-listing");
    return (listing && listing.dataset.path) || "/";
  }
  function join(folder, name) {
    return folder.replace(/\/+$/, "") + "/" + name;
  }
  function refresh() {
    const listing = document.getElementById("files-listing");
    if (listing && listing.dataset.refresh && window.htmx) {
      window.htmx.ajax("GET", listing.dataset.refresh, { target: "#files-listing", swap: "outerHTML" });
    }
  }
  function url(base, params) {
    return base + "?" + new URLSearchParams(params).toString();
  }
  async function call(method, base, params, body) {
    const response = await fetch(url(base, params), {
      method: method,
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": root.dataset.csrf, "Content-Type": "application/octet-stream", Accept: "application/json" },
    });
    if (!response.ok) {
      let text = say(strings.error, { status: response.status }), code = "";
      try {
        const body = (await response.json()).error;
        text = body.message || text;
        code = body.code || "";
      } catch (e) { /* not JSON */ }
      const error = new Error(text);
      error.code = code;
      error.refused = response.status < 500;  // a 4xx: retrying the same request will not help
      throw error;
    }
    return response.status === 204 ? null : response.json().catch(() => null);
  }
  function wait(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

  async function remoteSize(path) {
    try {
      return (await call("GET", api.stat, { path: path })).size;
    } catch (error) {
      if (error.refused) return 0;  // not there (yet): start from the beginning
      throw error;
    }
  }

  function key(path) { return STORE + location.pathname + path; }
  function remembered(path, file) {
    try {
      const saved = JSON.parse(localStorage.getItem(key(path)) || "null");
      return saved && saved.size === file.size && saved.modified === file.lastModified;
    } catch (e) { return false; }
  }

  async function upload(file) {
    const path = join(currentPath(), file.name);
    let offset = 0;
    progress.hidden = false;
    const draw = () => {
      bar.max = file.size || 1;
      bar.value = offset;
      barText.textContent = say(strings.uploading, { name: file.name, done: human(offset), total: human(file.size) });
    };
    if (remembered(path, file)) {
      offset = Math.min(await remoteSize(path), file.size);
      show(say(strings.resumed, { name: file.name, done: human(offset) }), "info");
    } else if (Array.from(document.querySelectorAll("#files-listing tr[data-name]")).some((row) => row.dataset.name === file.name)
               && !window.confirm(say(strings.confirm_replace, { name: file.name }))) {
      progress.hidden = true;
      return;
    }
    localStorage.setItem(key(path), JSON.stringify({ size: file.size, modified: file.lastModified }));
    draw();
    let failures = 0;
    do {
      const end = Math.min(offset + chunk, file.size);
      try {
        const answer = await call("PUT", api.content, { path: path, offset: offset }, file.slice(offset, end));
        offset = answer.size;
        failures = 0;
      } catch (error) {
        if ((error.refused && error.code !== "offset_mismatch") || ++failures > RETRIES) throw error;
        // The connection dropped (or the answer was lost): ask how much arrived, continue from there.
        show(say(strings.resuming, { name: file.name, done: human(offset) }), "warning");
        await wait(Math.min(500 * 2 ** (failures - 1), 8000));
        offset = Math.min(await remoteSize(path).catch(() => offset), file.size);
      }
      draw();
    } while (offset < file.size);
    localStorage.removeItem(key(path));
    show(say(strings.uploaded, { name: file.name }), "success");
  }

  async function uploadAll(picked) {
    for (const file of picked) {
      try {
        await upload(file);
      } catch (error) {
        show(say(strings.failed, { name: file.name, error: error.refused ? error.message : strings.network }), "error");
        break;
      } finally {
        refresh();
      }
    }
  }

  const pick = document.getElementById("files-pick");
  if (!pick) return;  // a volume this person may see but not change: browse and download only
  pick.addEventListener("change", (event) => {
    const picked = Array.from(event.target.files);
    event.target.value = "";
    uploadAll(picked);
  });
  // Files dropped anywhere on the card upload into the folder shown, as picked ones do.
  root.addEventListener("dragover", (event) => {
    if (!event.dataTransfer || !Array.from(event.dataTransfer.types).includes("Files")) return;
    event.preventDefault();
    root.classList.add("files-drop");
  });
  root.addEventListener("dragleave", () => root.classList.remove("files-drop"));
  root.addEventListener("drop", (event) => {
    if (!event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    root.classList.remove("files-drop");
    uploadAll(Array.from(event.dataTransfer.files).filter((file) => file.size || file.type));
  });

  document.getElementById("files-new-folder").addEventListener("click", async () => {
    const name = (window.prompt(strings.folder_name) || "").trim();
    if (!name) return;
    try {
      await call("POST", api.folder, { path: join(currentPath(), name) });
      show("", "info");
      refresh();
    } catch (error) {
      show(error.refused ? error.message : strings.network, "error");
    }
  });

  root.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-delete]");
    if (!button) return;
    if (!window.confirm(say(strings.confirm_delete, { name: button.dataset.name }))) return;
    try {
      await call("DELETE", api.files, { path: button.dataset.delete });
      show("", "info");
      refresh();
    } catch (error) {
      show(error.refused ? error.message : strings.network, "error");
    }
  });
})();
