// The canvas editor of a workflow (templates/admin/graphs/workflow/canvas.html): the graph
// drawn with Cytoscape.js and laid out by dagre, a palette, the side panel
// (graphs/static/graphs/canvas/panel.js), an accessible list of nodes and edges that does
// all the canvas does from the keyboard, the YAML, the problems, and the versions. One
// document (graphs/static/graphs/canvas/model.js) behind all of them; the server checks it
// as the author works (graphs/admin/canvas.py), with validate_workflow.
(function () {
  "use strict";
  var model = window.SwitchyardCanvas.model;
  var panel = window.SwitchyardCanvas.panel;
  var element = panel.element;
  var config = JSON.parse(document.getElementById("canvas-config").textContent);
  var CHECK_DELAY_MS = 300;

  var state = {
    doc: null,
    name: config.name,
    workflowId: config.workflowId,
    basedOn: null,
    dirty: false,
    moved: false,
    selected: null,
    problems: [],
    offered: [],
    tools: {},
    checkSerial: 0,
    checkTimer: null,
    connectFrom: null,
  };

  function $(id) { return document.getElementById(id); }

  function csrfToken() {
    var match = /(?:^|;\s*)csrftoken=([^;]+)/.exec(document.cookie);
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return match ? decodeURIComponent(match[1]) : input ? input.value : "";
  }

  // A JSON request to the editor's views; resolves to {status, body}.
  function call(method, url, body) {
    var options = { method: method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.headers["X-CSRFToken"] = csrfToken();
      options.body = JSON.stringify(body);
    }
    return fetch(url, options).then(function (response) {
      return response.json().catch(function () {
        return { error: "The server answered " + response.status + " without JSON." };
      }).then(function (json) { return { status: response.status, body: json }; });
    }, function (error) {
      return { status: 0, body: { error: "The server could not be reached: " + error.message } };
    });
  }

  function say(text, kind) {
    var status = $("canvas-status");
    status.textContent = text;
    status.className = "canvas-status " + (kind || "");
  }

  // ---- The canvas -----------------------------------------------------------------------
  cytoscape.use(cytoscapeDagre);
  var graph = cytoscape({
    container: $("canvas-graph"),
    minZoom: 0.2,
    // What is selected is the editor's (state.selected), shown by the class `chosen`: the
    // library's own selection would also mark the node a connection was clicked to.
    autounselectify: true,
    maxZoom: 3,
    style: [
      { selector: "node", style: {
        label: "data(label)", "text-wrap": "wrap", "text-max-width": 150, "font-size": 11,
        "text-valign": "center", "text-halign": "center", width: 170, height: 46,
        shape: "round-rectangle", "background-color": "#e8f0fb", "border-width": 1.5,
        "border-color": "#417690", color: "#1b1b1b",
      } },
      { selector: "node[type = 'entry'], node[type = 'exit']", style: {
        shape: "ellipse", width: 110, "background-color": "#e6f4ea", "border-color": "#2e7d32",
      } },
      { selector: "node[type = 'exit']", style: { "background-color": "#eceff1", "border-color": "#37474f" } },
      { selector: "node[type = 'transform']", style: { "background-color": "#f3e8fb", "border-color": "#6a1b9a" } },
      { selector: "node[type = 'switch']", style: {
        shape: "diamond", width: 150, height: 70, "background-color": "#fff8e1", "border-color": "#b28704",
      } },
      { selector: "node[type = 'approval']", style: {
        shape: "round-tag", "background-color": "#fff3e0", "border-color": "#e65100",
      } },
      { selector: "node.has-warning", style: { "border-color": "#b26a00", "border-width": 3, "border-style": "dashed" } },
      { selector: "node.has-error", style: { "border-color": "#ba2121", "border-width": 4, "border-style": "solid" } },
      { selector: "node.chosen", style: { "overlay-color": "#417690", "overlay-opacity": 0.18, "overlay-padding": 6 } },
      { selector: "node.connect-from", style: { "border-color": "#0b57d0", "border-width": 4 } },
      { selector: "edge", style: {
        width: 1.8, "curve-style": "bezier", "target-arrow-shape": "triangle",
        "line-color": "#78909c", "target-arrow-color": "#78909c", label: "data(label)",
        "font-size": 10, "text-background-color": "#fff", "text-background-opacity": 1,
        "text-background-padding": 2,
      } },
      { selector: "edge.chosen", style: { "line-color": "#0b57d0", "target-arrow-color": "#0b57d0", width: 3 } },
    ],
  });

  function nodeLabel(node) {
    if (node.type === "mcp") return node.id + "\n" + node.server + " · " + node.tool;
    if (node.type === "entry" || node.type === "exit") return node.id;
    return node.id + "\n" + node.type;
  }

  function layout(fit) {
    graph.layout({ name: "dagre", rankDir: "LR", nodeSep: 30, rankSep: 60, fit: false, animate: false }).run();
    if (fit !== false) fitAll();
  }

  // The whole graph in view, never magnified past its natural size (one node would fill
  // the canvas).
  function fitAll() {
    graph.resize();
    graph.fit(undefined, 24);
    if (graph.zoom() > 1) {
      graph.zoom(1);
      graph.center();
    }
  }

  // Pan and zoom out as little as needed for node `id` to be seen.
  function reveal(id) {
    var drawn = graph.getElementById("n:" + id);
    var at = drawn.renderedPosition();
    var margin = 90;
    if (at.x < margin || at.y < margin || at.x > graph.width() - margin || at.y > graph.height() - margin) fitAll();
  }

  // Bring the drawing in line with the document: nodes kept where the author put them, new
  // ones laid out with the rest.
  function drawGraph(relayout) {
    var known = {};
    var added = false;
    graph.batch(function () {
      model.nodes(state.doc).forEach(function (node) {
        if (typeof node.id !== "string" || known[node.id]) return;
        known[node.id] = true;
        var data = { id: "n:" + node.id, nodeId: node.id, type: node.type, label: nodeLabel(node) };
        var drawn = graph.getElementById(data.id);
        if (drawn.length) drawn.data(data);
        else { graph.add({ group: "nodes", data: data }); added = true; }
      });
      graph.nodes().forEach(function (drawn) { if (!known[drawn.data("nodeId")]) drawn.remove(); });
      var edgeIds = {};
      model.edges(state.doc).forEach(function (edge) {
        if (!known[edge.source] || !known[edge.target]) return;
        var id = "e:" + edge.source + ":" + edge.field;
        edgeIds[id] = true;
        var data = { id: id, source: "n:" + edge.source, target: "n:" + edge.target, label: edge.label, field: edge.field, sourceId: edge.source };
        var drawn = graph.getElementById(id);
        if (drawn.length && drawn.data("target") !== data.target) { drawn.remove(); drawn = graph.collection(); }
        if (drawn.length) drawn.data("label", data.label);
        else graph.add({ group: "edges", data: data });
      });
      graph.edges().forEach(function (drawn) { if (!edgeIds[drawn.id()]) drawn.remove(); });
    });
    if (relayout || added) layout(relayout === "fit" || graph.nodes().length <= 1);
    markProblems();
    selectDrawn();
  }

  function selectDrawn() {
    graph.elements().removeClass("chosen");
    if (state.selected) graph.getElementById("n:" + state.selected).addClass("chosen");
  }

  graph.on("dragfree", "node", function () { state.moved = true; });
  graph.on("tap", "node", function (event) {
    var id = event.target.data("nodeId");
    if (state.connectFrom) {
      connect(state.connectFrom, id);
      return;
    }
    select(id);
  });
  graph.on("tap", function (event) {
    if (event.target === graph) {
      endConnecting();
      select(null);
    }
  });
  graph.on("tap", "edge", function (event) {
    state.selectedEdge = { source: event.target.data("sourceId"), field: event.target.data("field") };
    graph.elements().removeClass("chosen");
    event.target.addClass("chosen");
    say("Edge " + state.selectedEdge.source + " → " + event.target.target().data("nodeId") +
      " selected: press Delete or use “Remove edge” to remove it.");
  });

  document.addEventListener("keydown", function (event) {
    var typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if (typing || (event.key !== "Delete" && event.key !== "Backspace")) return;
    if (!$("canvas-graph").contains(document.activeElement) && document.activeElement !== document.body) return;
    if (state.selectedEdge) {
      model.disconnect(state.doc, state.selectedEdge.source, state.selectedEdge.field);
      state.selectedEdge = null;
      changed({ shape: true, panel: true });
    } else if (state.selected) {
      model.removeNode(state.doc, state.selected);
      select(null);
      changed({ shape: true });
    }
  });

  // ---- Selecting, connecting ------------------------------------------------------------
  function select(id) {
    state.selected = id;
    state.selectedEdge = null;
    selectDrawn();
    drawPanel();
    drawList();
    scheduleCheck();
  }

  function connect(source, target) {
    try {
      var field = model.connect(state.doc, source, target);
      say("Connected " + source + " → " + target + " (" + field + ").", "ok");
      changed({ shape: true, panel: true });
      // Laid out again as it grows, until the author places a node by hand.
      if (!state.moved) layout(true);
    } catch (error) {
      say(error.message, "error");
    }
    endConnecting();
  }

  function startConnecting() {
    if (!state.selected) {
      say("Select the node to connect from first.", "error");
      return;
    }
    state.connectFrom = state.selected;
    graph.getElementById("n:" + state.selected).addClass("connect-from");
    say("Click the node " + state.selected + " should go to (Esc or a click on the background cancels).");
  }

  function endConnecting() {
    graph.nodes().removeClass("connect-from");
    state.connectFrom = null;
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && state.connectFrom) {
      endConnecting();
      say("Connecting cancelled.");
    }
  });

  // ---- The side panel -------------------------------------------------------------------
  function nodeIds() {
    return model.nodes(state.doc).map(function (node) { return node.id; });
  }

  function drawPanel() {
    var node = state.selected ? model.find(state.doc, state.selected) : null;
    var key = node && node.type === "mcp" ? node.server + "/" + node.tool : null;
    var known = key ? state.tools[key] : null;
    panel.render($("canvas-panel"), {
      doc: state.doc,
      nodeId: state.selected,
      nodeIds: nodeIds(),
      offered: state.offered,
      toolSchema: key ? (known === undefined ? undefined : known ? known.inputSchema || { type: "object" } : null) : null,
      toolDescription: known ? known.description : "",
      toolChoices: Object.keys(state.tools).map(function (found) { return state.tools[found]; })
        .filter(Boolean),
      changed: changed,
      select: function (id) { state.selected = id; },
    });
    panel.showProblems($("canvas-panel"), state.problems);
    if (key && known === undefined) toolOf(node.server, node.tool);
  }

  // The TOOL spec of one server's tool, for its args form.
  function toolOf(server, tool) {
    var key = server + "/" + tool;
    state.tools[key] = undefined;
    var url = config.urls.tools + "?server=" + encodeURIComponent(server) + "&tool=" + encodeURIComponent(tool);
    call("GET", url).then(function (answer) {
      var found = answer.status === 200 ? answer.body.tools[0] : null;
      state.tools[key] = found || null;
      if (state.selected && model.find(state.doc, state.selected)) drawPanel();
    });
  }

  // ---- The palette ----------------------------------------------------------------------
  function add(type, options) {
    var id = model.addNode(state.doc, type, options);
    placeNew(id);
    select(id);
    changed({ shape: true, panel: true });
    say("Added " + type + " node " + id + ".", "ok");
    return id;
  }

  // A new node beside the selected one (or in the middle of the view), not on top of another.
  function placeNew(id) {
    var near = state.selected ? graph.getElementById("n:" + state.selected) : null;
    var extent = graph.extent();
    var position = near && near.length ? { x: near.position("x") + 220, y: near.position("y") } :
      { x: (extent.x1 + extent.x2) / 2, y: (extent.y1 + extent.y2) / 2 };
    while (graph.nodes().some(function (drawn) {
      return Math.abs(drawn.position("x") - position.x) < 120 && Math.abs(drawn.position("y") - position.y) < 40;
    })) position.y += 70;
    graph.add({ group: "nodes", data: { id: "n:" + id, nodeId: id, type: "", label: id }, position: position });
    reveal(id);
  }

  Array.prototype.forEach.call(document.querySelectorAll("[data-add]"), function (button) {
    button.addEventListener("click", function () { add(button.getAttribute("data-add")); });
  });

  var searchTimer = null;
  var searchSerial = 0;
  function searchTools() {
    var query = $("tool-search").value;
    var serial = ++searchSerial;
    call("GET", config.urls.tools + "?q=" + encodeURIComponent(query)).then(function (answer) {
      if (serial !== searchSerial) return;
      var list = $("tool-results");
      list.innerHTML = "";
      if (answer.status !== 200) {
        list.appendChild(element("li", { class: "problem error", text: answer.body.error }));
        return;
      }
      if (!answer.body.tools.length) {
        list.appendChild(element("li", { class: "help", text: "No provider's tool matches: a provider's tools appear here once it is saved and its tools refreshed." }));
      }
      answer.body.tools.forEach(function (tool) {
        state.tools[tool.server + "/" + tool.tool] = tool;
        list.appendChild(element("li", {}, [element("button", {
          type: "button", class: "tool-choice", "data-server": tool.server, "data-tool": tool.tool,
          title: tool.description,
          onclick: function () { add("mcp", { server: tool.server, tool: tool.tool }); },
        }, [element("strong", { text: tool.tool }), document.createTextNode(" · " + tool.server),
          element("span", { class: "help", text: tool.description })])]));
      });
      fillToolChoices(answer.body.tools);
    });
  }
  $("tool-search").addEventListener("input", function () {
    window.clearTimeout(searchTimer);
    searchTimer = window.setTimeout(searchTools, 200);
  });

  // ---- The accessible list: every node and edge, and what the canvas does, by keyboard ----
  function drawList() {
    var list = $("canvas-list");
    var focused = document.activeElement && list.contains(document.activeElement) ? document.activeElement.getAttribute("data-focus-key") : null;
    list.innerHTML = "";
    var items = element("ul", { class: "node-list" });
    var ids = nodeIds();
    model.nodes(state.doc).forEach(function (node) {
      var problems = state.problems.filter(function (problem) { return problem.node === node.id; });
      var selectButton = element("button", {
        type: "button", class: "node-select", "aria-pressed": String(state.selected === node.id),
        "data-focus-key": "select:" + node.id,
        onclick: function () { select(node.id); $("canvas-panel").querySelector("input, textarea, select").focus(); },
      }, [element("strong", { text: node.id }), document.createTextNode(" (" + node.type +
        (node.type === "mcp" ? ": " + node.tool + " on " + node.server : "") + ")")]);
      var edges = element("ul", { class: "edge-list", "aria-label": "Edges out of " + node.id });
      model.edgesOf(node).forEach(function (edge) {
        edges.appendChild(element("li", {}, [
          document.createTextNode((edge.label || edge.field) + " → " + edge.target + " "),
          element("button", { type: "button", class: "button small", "data-focus-key": "remove:" + node.id + ":" + edge.field,
            text: "Remove edge " + node.id + " → " + edge.target,
            onclick: function () {
              model.disconnect(state.doc, node.id, edge.field);
              changed({ shape: true, panel: true });
              say("Removed edge " + node.id + " → " + edge.target + ".", "ok");
            } }),
        ]));
      });
      var targetId = "connect-" + node.id;
      var target = element("select", { id: targetId, "data-focus-key": "target:" + node.id });
      ids.filter(function (id) { return id !== node.id; }).forEach(function (id) {
        target.appendChild(element("option", { value: id, text: id }));
      });
      var connectRow = node.type === "exit" ? null : element("div", { class: "connect-row" }, [
        element("label", { for: targetId, text: "Connect " + node.id + " to " }), target,
        element("button", { type: "button", class: "button small", "data-focus-key": "connect:" + node.id,
          text: "Add edge", onclick: function () { if (target.value) connect(node.id, target.value); } }),
      ]);
      items.appendChild(element("li", {
        class: "node-item" + (problems.some(function (p) { return p.severity === "error"; }) ? " has-error" : ""),
        "data-node": node.id,
      }, [
        selectButton,
        problems.length ? element("span", { class: "problem-count", text: " " + problems.length + " problem(s)" }) : null,
        edges,
        connectRow,
        element("button", { type: "button", class: "button small", "data-focus-key": "delete:" + node.id,
          text: "Delete " + node.id, onclick: function () {
            model.removeNode(state.doc, node.id);
            if (state.selected === node.id) state.selected = null;
            changed({ shape: true, panel: true });
            say("Deleted " + node.id + ".", "ok");
          } }),
      ]));
    });
    if (!ids.length) items.appendChild(element("li", { class: "help", text: "No nodes yet: add them below or from the palette." }));
    list.appendChild(items);
    if (focused) {
      var again = list.querySelector('[data-focus-key="' + focused + '"]');
      if (again) again.focus();
    }
  }

  // The keyboard form that adds a node (the palette's twin).
  var typeSelect = $("add-type");
  model.TYPES.forEach(function (type) { typeSelect.appendChild(element("option", { value: type, text: type })); });
  function fillToolChoices(tools) {
    var choices = $("add-tool");
    choices.innerHTML = "";
    tools.forEach(function (tool) {
      choices.appendChild(element("option", { value: tool.server + "/" + tool.tool, text: tool.tool + " on " + tool.server }));
    });
  }
  typeSelect.addEventListener("change", function () {
    $("add-tool-row").hidden = typeSelect.value !== "mcp";
    if (typeSelect.value === "mcp" && !$("add-tool").options.length) searchTools();
  });
  $("add-node-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var type = typeSelect.value;
    var options = { id: $("add-id").value.trim() || undefined };
    if (type === "mcp") {
      var chosen = $("add-tool").value.split("/");
      if (chosen.length < 2) { say("Choose the tool the mcp node calls (search the palette to list more).", "error"); return; }
      options.server = chosen[0];
      options.tool = chosen.slice(1).join("/");
    }
    var id = add(type, options);
    $("add-id").value = "";
    var again = $("canvas-list").querySelector('[data-focus-key="select:' + id + '"]');
    if (again) again.focus();
  });

  // ---- Problems -------------------------------------------------------------------------
  function markProblems() {
    graph.nodes().removeClass("has-error has-warning");
    state.problems.forEach(function (problem) {
      var id = problem.node || model.nodeOfPointer(state.doc, problem.path);
      if (!id) return;
      graph.getElementById("n:" + id).addClass(problem.severity === "error" ? "has-error" : "has-warning");
    });
  }

  function drawProblems() {
    var list = $("canvas-problems");
    list.innerHTML = "";
    var errors = state.problems.filter(function (p) { return p.severity === "error"; }).length;
    var warnings = state.problems.length - errors;
    $("problems-summary").textContent = state.problems.length ?
      errors + " error(s), " + warnings + " warning(s)" : "No problems: the graph is valid.";
    state.problems.forEach(function (problem) {
      var item = element("li", { class: "problem " + problem.severity, "data-code": problem.code }, [
        element("strong", { text: problem.severity + " " }),
        problem.node ? element("button", { type: "button", class: "link-button", text: problem.node,
          onclick: function () { select(problem.node); } }) : null,
        document.createTextNode(" " + problem.message + " "),
      ]);
      if (problem.fix) {
        item.appendChild(element("button", { type: "button", class: "button small apply-fix", text: "Apply fix",
          title: JSON.stringify(problem.fix), onclick: function () { applyFix(problem); } }));
      }
      list.appendChild(item);
    });
    markProblems();
    drawList();
  }

  function applyFix(problem) {
    try {
      model.applyPatch(state.doc, problem.fix);
      say("Fix applied: " + problem.code + ".", "ok");
      changed({ shape: true, panel: true });
    } catch (error) {
      say("The fix no longer applies (" + error.message + "); the next check offers a new one.", "error");
    }
  }

  // The fixes offered under the panel's fields.
  $("canvas-panel").addEventListener("click", function (event) {
    var button = event.target.closest(".apply-fix[data-problem]");
    if (button) applyFix(state.problems[Number(button.getAttribute("data-problem"))]);
  });

  // ---- Checking: the canvas -> the server -> YAML, problems, offered values --------------
  function scheduleCheck() {
    window.clearTimeout(state.checkTimer);
    state.checkTimer = window.setTimeout(function () { check({ document: state.doc }); }, CHECK_DELAY_MS);
  }

  function check(body) {
    var serial = ++state.checkSerial;
    body.name = state.workflowId ? state.name : undefined;
    body.node = state.selected || undefined;
    return call("POST", config.urls.check, body).then(function (answer) {
      if (serial !== state.checkSerial) return;  // a newer edit is being checked
      if (answer.status !== 200) {
        $("canvas-validity").textContent = answer.body.error || "The check failed.";
        $("canvas-validity").className = "canvas-status error";
        return;
      }
      var result = answer.body;
      if (!window.performance.getEntriesByName("canvas-checked").length) window.performance.mark("canvas-checked");
      state.problems = result.problems;
      state.offered = result.offered;
      if (body.yaml !== undefined) {
        if (result.document) {
          state.doc = result.document;
          drawGraph();
          drawPanel();
        }
      } else if (document.activeElement !== $("canvas-yaml")) {
        $("canvas-yaml").value = result.yaml;
      }
      drawProblems();
      panel.showProblems($("canvas-panel"), state.problems);
      panel.showOffered($("canvas-panel"), state.offered);
      var validity = $("canvas-validity");
      validity.textContent = (result.valid ? "Valid" : "Not valid: see the problems") +
        (state.dirty ? " · unsaved changes" : " · saved");
      validity.className = "canvas-status " + (result.valid ? "ok" : "error");
      $("canvas-save").disabled = false;
    });
  }

  // Every change of the document from the canvas, the panel or the list.
  function changed(what) {
    what = what || {};
    state.dirty = true;
    if (what.shape) drawGraph();
    else graph.nodes().forEach(function (drawn) {
      var node = model.find(state.doc, drawn.data("nodeId"));
      if (node) drawn.data("label", nodeLabel(node));
    });
    if (what.panel) drawPanel();
    drawList();
    scheduleCheck();
  }

  var yamlTimer = null;
  $("canvas-yaml").addEventListener("input", function () {
    state.dirty = true;
    window.clearTimeout(yamlTimer);
    yamlTimer = window.setTimeout(function () { check({ yaml: $("canvas-yaml").value }); }, CHECK_DELAY_MS);
  });

  // ---- Save, publish, versions ------------------------------------------------------------
  function identity() {
    if (state.workflowId) return { name: state.name };
    var name = $("canvas-name").value.trim();
    var group = $("canvas-group").value.trim();
    model.tool(state.doc).name = name;
    state.doc.server = state.doc.server || {};
    state.doc.server.name = group;
    return { group: group };
  }

  $("canvas-save").addEventListener("click", function () {
    var body = Object.assign({ document: state.doc, based_on: state.basedOn, comment: $("canvas-comment").value || undefined }, identity());
    say("Saving…");
    call("POST", config.urls.save, body).then(function (answer) {
      if (answer.status !== 201) {
        state.problems = answer.body.problems && answer.body.problems.length ? answer.body.problems : state.problems;
        drawProblems();
        say(answer.body.error || "Not saved.", "error");
        return;
      }
      if (!state.workflowId) {
        window.location.href = config.urls.page.replace("/0/", "/" + answer.body.id + "/") + "?saved=" + answer.body.version;
        return;
      }
      reload().then(function () {
        say("Saved as draft version " + answer.body.version + ". Test-run it, then publish it.", "ok");
      });
    });
  });

  function publish(number, force) {
    say("Publishing version " + number + " (checking the workflow's examples)…");
    return call("POST", config.urls.publish, { version: number, force: force === true }).then(function (answer) {
      if (answer.status !== 200) {
        var examplesFailed = (answer.body.problems || []).some(function (p) { return p.code === "example_changed"; }) ||
          /example/i.test(answer.body.error || "");
        say(answer.body.error || "Not published.", "error");
        if (examplesFailed && window.confirm(answer.body.error + "\n\nPublish anyway?")) return publish(number, true);
        return;
      }
      say("Version " + answer.body.published_version + " is published: callers get it now.", "ok");
      loadVersions();
    });
  }

  function loadVersions() {
    return call("GET", config.urls.state).then(function (answer) {
      if (answer.status === 200) drawVersions(answer.body.versions, answer.body.published_version);
    });
  }

  // The workflow as stored (after a save: the draft just made, servers bound), drawn again
  // where the author left it.
  function reload() {
    return call("GET", config.urls.state).then(function (answer) {
      if (answer.status !== 200) {
        say(answer.body.error || "The workflow could not be read.", "error");
        return;
      }
      state.dirty = false;
      drawVersions(answer.body.versions, answer.body.published_version);
      return start(answer.body.document, answer.body.based_on, state.selected);
    });
  }

  function drawVersions(versions, published) {
    var body = $("canvas-versions");
    body.innerHTML = "";
    ["diff-from", "diff-to"].forEach(function (id) { $(id).innerHTML = ""; });
    versions.forEach(function (version, index) {
      ["diff-from", "diff-to"].forEach(function (id) {
        var option = element("option", { value: version.version, text: "version " + version.version + " (" + version.status + ")" });
        if ((id === "diff-to" && index === 0) || (id === "diff-from" && index === 1)) option.selected = true;
        $(id).appendChild(option);
      });
      var action = version.version === published ? element("span", { text: "served now" }) :
        element("button", { type: "button", class: "button small", text: (published && version.version < published ? "Roll back to " : "Publish ") + version.version,
          onclick: function () {
            var verb = published && version.version < published ? "Roll back to" : "Publish";
            if (window.confirm(verb + " version " + version.version + "? Callers get it at once.")) publish(version.version);
          } });
      body.appendChild(element("tr", {}, [
        element("td", { text: String(version.version) }), element("td", { text: version.status }),
        element("td", { text: version.author || "" }), element("td", { text: version.created_at.replace("T", " ").slice(0, 19) }),
        element("td", { text: version.comment || "" }), element("td", {}, [action]),
      ]));
    });
  }

  // The buttons of a stored workflow (a new one has none until its first save).
  function bindVersionButtons() {
    $("canvas-publish").addEventListener("click", function () {
      if (!state.basedOn) return say("Save first: publishing serves a saved version.", "error");
      if (state.dirty) {
        return say("Save your changes first: publishing serves the saved version.", "error");
      }
      publish(state.basedOn);
    });

    $("canvas-test-run").addEventListener("click", function () {
      if (!state.basedOn) return say("Save first: a test run runs a saved version.", "error");
      window.location.href = config.urls.test_run + "?version=" + state.basedOn;
    });

    $("diff-show").addEventListener("click", function () {
      var url = config.urls.diff + "?from=" + $("diff-from").value + "&to=" + $("diff-to").value;
      call("GET", url).then(function (answer) {
        var out = $("diff-output");
        out.innerHTML = "";
        if (answer.status !== 200) { out.textContent = answer.body.error; return; }
        if (!answer.body.lines.length) { out.textContent = "The two versions are the same."; return; }
        answer.body.lines.forEach(function (line) {
          var kind = line.charAt(0) === "+" ? "added" : line.charAt(0) === "-" ? "removed" : "";
          out.appendChild(element("span", { class: "diff-line " + kind, text: line + "\n" }));
        });
        if (answer.body.cut) out.appendChild(element("span", { text: "… (cut)" }));
      });
    });
  }

  // ---- Toolbar ------------------------------------------------------------------------------
  $("canvas-fit").addEventListener("click", fitAll);
  $("canvas-layout").addEventListener("click", function () { layout(true); });
  $("canvas-zoom-in").addEventListener("click", function () { graph.zoom({ level: graph.zoom() * 1.25, renderedPosition: { x: graph.width() / 2, y: graph.height() / 2 } }); });
  $("canvas-zoom-out").addEventListener("click", function () { graph.zoom({ level: graph.zoom() / 1.25, renderedPosition: { x: graph.width() / 2, y: graph.height() / 2 } }); });
  $("canvas-connect").addEventListener("click", startConnecting);

  // ---- Start ----------------------------------------------------------------------------
  function start(doc, basedOn, selected) {
    state.doc = doc;
    state.basedOn = basedOn;
    state.selected = selected && model.find(doc, selected) ? selected : null;
    drawGraph(graph.nodes().length ? undefined : "fit");
    drawPanel();
    drawList();
    window.performance.mark("canvas-drawn");
    window.SwitchyardCanvas.drawnAt = window.performance.now();
    return check({ document: state.doc });
  }

  window.SwitchyardCanvas.state = state;
  window.SwitchyardCanvas.graph = graph;
  searchTools();
  if (config.urls.state) {
    bindVersionButtons();
    reload().then(function () {
      var saved = /[?&]saved=(\d+)/.exec(window.location.search);
      if (saved) say("Saved as draft version " + saved[1] + ". Test-run it, then publish it.", "ok");
    });
  } else {
    ["canvas-name", "canvas-group"].forEach(function (id) {
      $(id).addEventListener("input", function () { identity(); scheduleCheck(); });
    });
    start(model.blank($("canvas-name").value, $("canvas-group").value), null);
  }
})();
