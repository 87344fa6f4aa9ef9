// Drag-and-drop upload over the chunked protocol (profiles/api.py): start a session, PUT chunks with
// Upload-Offset, ask the server's offset after any error and continue from there, then complete.
(function () {
  "use strict";
  var root = document.getElementById("uploader");
  if (!root) { return; }
  var msgs = document.getElementById("t-msgs").dataset;
  var input = document.getElementById("file");
  var drop = document.getElementById("drop");
  var dropText = document.getElementById("drop-text");
  var send = document.getElementById("send");
  var bar = document.getElementById("bar");
  var statusLine = document.getElementById("upload-status");
  var csrf = root.querySelector("input[name=csrfmiddlewaretoken]").value;
  var chunkBytes = parseInt(root.dataset.chunkBytes, 10);
  var chosen = null;

  function choose(file) {
    chosen = file;
    dropText.textContent = file.name + " (" + (file.size / 1048576).toFixed(1) + " MiB)";
    send.disabled = false;
  }
  input.addEventListener("change", function () { if (input.files.length) { choose(input.files[0]); } });
  // A file chosen before this script ran (a slow load, or the browser restoring the form on back or
  // reload) fired its change event to no one: take it up now.
  if (input.files.length) { choose(input.files[0]); }
  ["dragenter", "dragover"].forEach(function (t) {
    drop.addEventListener(t, function (ev) { ev.preventDefault(); drop.classList.add("over"); });
  });
  ["dragleave", "drop"].forEach(function (t) {
    drop.addEventListener(t, function (ev) { ev.preventDefault(); drop.classList.remove("over"); });
  });
  drop.addEventListener("drop", function (ev) {
    if (ev.dataTransfer && ev.dataTransfer.files.length) { choose(ev.dataTransfer.files[0]); }
  });

  function request(method, url, body, headers, onProgress) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      xhr.open(method, url);
      xhr.setRequestHeader("X-CSRFToken", csrf);
      xhr.setRequestHeader("Accept", "application/json");
      Object.keys(headers || {}).forEach(function (k) { xhr.setRequestHeader(k, headers[k]); });
      if (onProgress) { xhr.upload.onprogress = onProgress; }
      xhr.onload = function () {
        var data = null;
        try { data = JSON.parse(xhr.responseText); } catch (e) { data = {detail: xhr.responseText}; }
        resolve({status: xhr.status, data: data});
      };
      xhr.onerror = function () { reject(new Error("network")); };
      xhr.send(body);
    });
  }
  function show(sent, total) {
    var pct = total ? Math.floor(sent * 100 / total) : 0;
    bar.style.width = pct + "%";
    statusLine.textContent = msgs.sending + " " + pct + "% (" + (sent / 1048576).toFixed(1) + " / " + (total / 1048576).toFixed(1) + " MiB)";
  }
  function fail(detail) {
    statusLine.textContent = msgs.failed + " " + (typeof detail === "string" ? detail : JSON.stringify(detail));
    statusLine.classList.add("error");
    send.disabled = false;
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  async function upload() {
    send.disabled = true;
    statusLine.classList.remove("error");
    var file = chosen;
    var tags = document.getElementById("tags").value.split(",").map(function (s) { return s.trim(); }).filter(Boolean);
    var start = await request("POST", root.dataset.startUrl, JSON.stringify({
      filename: file.name, size: file.size, name: document.getElementById("name").value,
      sku: document.getElementById("sku").value, tags: tags
    }), {"Content-Type": "application/json"});
    if (start.status !== 201) { return fail(start.data); }
    var url = start.data.url;
    var offset = 0;
    var failures = 0;
    while (offset < file.size) {
      var end = Math.min(offset + chunkBytes, file.size);
      try {
        var base = offset;
        var res = await request("PUT", url, file.slice(offset, end), {
          "Upload-Offset": String(offset), "Content-Type": "application/octet-stream"
        }, function (ev) { show(base + ev.loaded, file.size); });
        if (res.status === 200 || res.status === 409) {
          offset = res.data.offset; failures = 0;
          show(offset, file.size);
          continue;
        }
        if (res.status >= 400 && res.status < 500) { return fail(res.data); }
        throw new Error("server " + res.status);
      } catch (err) {
        failures += 1;
        if (failures > 20) { return fail(String(err)); }
        statusLine.textContent = msgs.retry;
        await sleep(Math.min(30000, 500 * Math.pow(2, failures)));
        try {  // resume from what the server has
          var state = await request("GET", url, null, {});
          if (state.status === 200) { offset = state.data.offset; statusLine.textContent = msgs.resuming + " " + offset; }
        } catch (e) { /* keep retrying */ }
      }
    }
    var done = await request("POST", url + "complete/", null, {});
    if (done.status !== 201) { return fail(done.data); }
    bar.style.width = "100%";
    statusLine.textContent = msgs.done;
    window.location.href = root.dataset.profileUrl.replace("/0/", "/" + done.data.id + "/");
  }
  send.addEventListener("click", function () { upload().catch(function (e) { fail(String(e)); }); });
})();
