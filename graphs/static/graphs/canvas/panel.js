// The side panel of the canvas editor: the selected node's fields as a form. An mcp node's
// args are a form made from its tool's inputSchema, each field a literal or a JSONata
// expression, with the values that can reach the node offered; JSONata is highlighted as it
// is typed and its errors shown with their position; a switch's conditions in JSON Logic; an
// approval's message, form, timeout and routes. Every change goes through the model and then
// `context.changed()`; the panel is drawn again only when the selection or the graph's shape
// changes, so typing never loses its place.
(function () {
  "use strict";
  var model = window.SwitchyardCanvas.model;
  var serial = 0;

  function element(tag, attributes, children) {
    var made = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (key) {
      if (key === "text") made.textContent = attributes[key];
      else if (key.indexOf("on") === 0) made.addEventListener(key.slice(2), attributes[key]);
      else if (attributes[key] !== undefined && attributes[key] !== null) {
        made.setAttribute(key, attributes[key]);
      }
    });
    (children || []).forEach(function (child) { if (child) made.appendChild(child); });
    return made;
  }

  function fieldId() {
    serial += 1;
    return "canvas-field-" + serial;
  }

  // Where validation's problems about `pointer` are shown, under its field.
  function problemsFor(pointer) {
    return element("div", { class: "field-problems", "data-problems-for": pointer, "aria-live": "polite" });
  }

  // ---- JSONata, highlighted ------------------------------------------------------------
  var TOKENS = /(\/\*[\s\S]*?(?:\*\/|$))|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)|(`[^`]*`?)|(\$[A-Za-z0-9_]*)|(\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)|(\b(?:and|or|in|true|false|null|function)\b)|([A-Za-z_][A-Za-z0-9_]*)|([^\sA-Za-z0-9_$"'`]+)|(\s+)/g;
  var CLASSES = [null, "comment", "string", "name", "variable", "number", "keyword", "field", "operator", null];

  function escaped(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // The expression as highlighted HTML; `errorAt` (0-based) marks the character a syntax
  // error names.
  function highlighted(source, errorAt) {
    var html = "";
    var match;
    var seen = 0;
    TOKENS.lastIndex = 0;
    while ((match = TOKENS.exec(source)) !== null && match[0].length) {
      var kind = null;
      for (var group = 1; group < match.length; group++) {
        if (match[group] !== undefined) { kind = CLASSES[group]; break; }
      }
      var text = match[0];
      var start = match.index;
      if (errorAt !== null && errorAt >= start && errorAt < start + text.length) {
        var at = errorAt - start;
        var inner = escaped(text.slice(0, at)) + '<mark class="jsonata-error">' +
          escaped(text.charAt(at)) + "</mark>" + escaped(text.slice(at + 1));
        html += kind ? '<span class="tok-' + kind + '">' + inner + "</span>" : inner;
      } else {
        html += kind ? '<span class="tok-' + kind + '">' + escaped(text) + "</span>" : escaped(text);
      }
      seen = start + text.length;
    }
    html += escaped(source.slice(seen));
    if (errorAt !== null && errorAt >= source.length) html += '<mark class="jsonata-error"> </mark>';
    return html + "\n";
  }

  // A JSONata editor: a textarea over its highlighted copy, and a picker of the values the
  // node can read that inserts one at the caret.
  function jsonataField(label, value, pointer, onInput, context) {
    var id = fieldId();
    var shown = element("pre", { class: "jsonata-highlight", "aria-hidden": "true" });
    var area = element("textarea", {
      id: id,
      class: "jsonata-input",
      rows: Math.min(Math.max(String(value).split("\n").length + 1, 3), 14),
      spellcheck: "false",
      "data-pointer": pointer,
      "aria-describedby": id + "-problems",
    });
    area.value = value;
    function paint() {
      var error = area.getAttribute("data-error-at");
      shown.innerHTML = highlighted(area.value, error === null ? null : Number(error));
      shown.scrollTop = area.scrollTop;
    }
    area.addEventListener("input", function () {
      area.removeAttribute("data-error-at");
      paint();
      onInput(area.value);
    });
    area.addEventListener("scroll", function () { shown.scrollTop = area.scrollTop; });
    area.paint = paint;
    paint();
    var picker = offeredPicker(context, function (path) {
      var start = area.selectionStart;
      area.value = area.value.slice(0, start) + path + area.value.slice(area.selectionEnd);
      area.selectionStart = area.selectionEnd = start + path.length;
      area.dispatchEvent(new Event("input"));
      area.focus();
    });
    var problems = problemsFor(pointer);
    problems.id = id + "-problems";
    return element("div", { class: "panel-field" }, [
      element("label", { for: id, text: label }),
      element("div", { class: "jsonata-editor" }, [shown, area]),
      picker,
      problems,
    ]);
  }

  // A select of what the node's expressions can read (validation's knowledge of upstream
  // outputs); refilled as each check answers.
  function offeredPicker(context, insert) {
    var select = element("select", {
      class: "offered-picker",
      "aria-label": "Insert a value this node can read",
      onchange: function () {
        if (select.value) insert(select.value);
        select.value = "";
      },
    });
    fillOffered(select, context.offered);
    return select;
  }

  function fillOffered(select, offered) {
    select.innerHTML = "";
    select.appendChild(element("option", { value: "", text: "Insert a value this node can read…" }));
    (offered || []).forEach(function (value) {
      var text = value.path + (value.type ? " : " + value.type : "") +
        (value.description ? " — " + value.description : "");
      select.appendChild(element("option", { value: value.path, text: text }));
    });
  }

  // ---- JSON (schemas, JSON Logic rules, forms) --------------------------------------------
  function jsonField(label, value, pointer, onValue) {
    var id = fieldId();
    var area = element("textarea", { id: id, class: "json-input", rows: 4, spellcheck: "false", "data-pointer": pointer });
    area.value = value === undefined ? "" : JSON.stringify(value, null, 2);
    var local = element("div", { class: "field-problems local", "aria-live": "polite" });
    area.addEventListener("input", function () {
      if (!area.value.trim()) {
        local.textContent = "";
        onValue(undefined);
        return;
      }
      try {
        var parsed = JSON.parse(area.value);
        local.textContent = "";
        onValue(parsed);
      } catch (error) {
        local.textContent = "Not JSON yet: " + error.message + " (nothing changed until it is).";
      }
    });
    return element("div", { class: "panel-field" }, [
      element("label", { for: id, text: label }), area, local, problemsFor(pointer),
    ]);
  }

  function targetSelect(label, current, context, onChange) {
    var id = fieldId();
    var select = element("select", { id: id, onchange: function () { onChange(select.value); } });
    select.appendChild(element("option", { value: "", text: "(none)" }));
    context.nodeIds.forEach(function (nodeId) {
      var option = element("option", { value: nodeId, text: nodeId });
      if (nodeId === current) option.selected = true;
      select.appendChild(option);
    });
    return element("div", { class: "panel-field inline" }, [element("label", { for: id, text: label }), select]);
  }

  function textField(label, value, pointer, onChange, attributes) {
    var id = fieldId();
    var input = element("input", Object.assign({ id: id, type: "text", "data-pointer": pointer }, attributes || {}));
    input.value = value === undefined || value === null ? "" : value;
    input.addEventListener("input", function () { onChange(input.value); });
    return element("div", { class: "panel-field" }, [
      element("label", { for: id, text: label }), input, problemsFor(pointer),
    ]);
  }

  // ---- An mcp node's args, from its tool's inputSchema -----------------------------------
  function argMode(value) {
    if (typeof value === "string" && value.charAt(0) === "$") return { expression: true, text: value };
    if (value && typeof value === "object" && !Array.isArray(value)) {
      var keys = Object.keys(value);
      if (keys.length === 1 && keys[0] === "expr") return { expression: true, text: String(value.expr) };
      if (keys.length === 1 && keys[0] === "literal") return { expression: false, value: value.literal };
    }
    return { expression: false, value: value };
  }

  function expressionArg(text) {
    return text.trim().charAt(0) === "$" ? text : { expr: text };
  }

  function literalArg(value) {
    var needsEscape = (typeof value === "string" && value.charAt(0) === "$") ||
      (value && typeof value === "object" && !Array.isArray(value) &&
        Object.keys(value).length === 1 && (value.expr !== undefined || value.literal !== undefined));
    return needsEscape ? { literal: value } : value;
  }

  function typesOf(schema) {
    var declared = schema && schema.type;
    return Array.isArray(declared) ? declared : declared ? [declared] : [];
  }

  function literalInput(id, schema, value, onValue) {
    var types = typesOf(schema);
    if (Array.isArray(schema.enum)) {
      var select = element("select", { id: id, onchange: function () {
        onValue(select.value === "" ? undefined : schema.enum[Number(select.value)]);
      } });
      select.appendChild(element("option", { value: "", text: "(not set)" }));
      schema.enum.forEach(function (choice, index) {
        var option = element("option", { value: String(index), text: JSON.stringify(choice) });
        if (JSON.stringify(choice) === JSON.stringify(value)) option.selected = true;
        select.appendChild(option);
      });
      return select;
    }
    if (types.length === 1 && types[0] === "boolean") {
      var box = element("select", { id: id, onchange: function () {
        onValue(box.value === "" ? undefined : box.value === "true");
      } });
      ["", "true", "false"].forEach(function (choice) {
        var option = element("option", { value: choice, text: choice || "(not set)" });
        if (String(value) === choice) option.selected = true;
        box.appendChild(option);
      });
      return box;
    }
    if (types.length === 1 && (types[0] === "integer" || types[0] === "number")) {
      var number = element("input", { id: id, type: "number", step: types[0] === "integer" ? "1" : "any" });
      number.value = typeof value === "number" ? String(value) : "";
      number.addEventListener("input", function () {
        onValue(number.value === "" ? undefined : Number(number.value));
      });
      return number;
    }
    if (types.length === 1 && types[0] === "string" || (!types.length && typeof value === "string")) {
      var text = element("input", { id: id, type: "text" });
      text.value = typeof value === "string" ? value : "";
      text.addEventListener("input", function () { onValue(text.value === "" ? undefined : text.value); });
      return text;
    }
    var json = element("textarea", { id: id, rows: 3, spellcheck: "false", class: "json-input" });
    json.value = value === undefined ? "" : JSON.stringify(value, null, 2);
    json.addEventListener("input", function () {
      if (!json.value.trim()) return onValue(undefined);
      try { onValue(JSON.parse(json.value)); json.removeAttribute("aria-invalid"); } catch (error) {
        json.setAttribute("aria-invalid", "true");
      }
    });
    return json;
  }

  function argField(node, name, schema, required, context) {
    var args = node.args;
    var pointer = model.pointerOf(context.doc, node.id, "args." + name);
    var mode = argMode(args[name]);
    var id = fieldId();
    var described = [typesOf(schema).join(" | ") || "any", required ? "required" : "optional"];
    if (Array.isArray(schema.enum)) described.push("one of " + schema.enum.map(JSON.stringify).join(", "));
    var heading = element("div", { class: "arg-heading" }, [
      element("span", { class: "arg-name", text: name + (required ? " *" : "") }),
      element("span", { class: "arg-type", text: " (" + described.join(", ") + ")" }),
    ]);
    var help = schema.description ? element("p", { class: "help", text: schema.description }) : null;
    var body = element("div", { class: "arg-body" });
    var modeSelect = element("select", {
      "aria-label": name + ": literal value or JSONata expression",
      onchange: function () {
        if (modeSelect.value === "expression") args[name] = expressionArg("$.");
        else delete args[name];
        context.changed();
        draw();
      },
    });
    [["literal", "Literal"], ["expression", "JSONata expression"]].forEach(function (pair) {
      var option = element("option", { value: pair[0], text: pair[1] });
      if ((pair[0] === "expression") === mode.expression) option.selected = true;
      modeSelect.appendChild(option);
    });
    function set(value) {
      if (value === undefined) delete args[name];
      else args[name] = value;
      context.changed();
    }
    function draw() {
      mode = argMode(args[name]);
      body.innerHTML = "";
      if (mode.expression) {
        body.appendChild(jsonataField("Expression for " + name, mode.text, pointer, function (text) {
          set(expressionArg(text));
        }, context));
      } else {
        body.appendChild(element("label", { for: id, class: "visually-hidden", text: "Value of " + name }));
        body.appendChild(literalInput(id, schema, mode.value, function (value) {
          set(value === undefined ? undefined : literalArg(value));
        }));
        body.appendChild(problemsFor(pointer));
      }
    }
    draw();
    return element("fieldset", { class: "arg", "data-arg": name }, [
      element("legend", {}, [heading]), help, modeSelect, body,
    ]);
  }

  function argsForm(node, context) {
    node.args = node.args && typeof node.args === "object" && !Array.isArray(node.args) ? node.args : {};
    var wrapper = element("div", { class: "args-form" });
    var schema = context.toolSchema;
    if (schema === undefined) {
      wrapper.appendChild(element("p", { class: "help", text: "Reading the tool's inputSchema…" }));
      return wrapper;
    }
    var properties = schema && schema.properties && typeof schema.properties === "object" ? schema.properties : {};
    var required = schema && Array.isArray(schema.required) ? schema.required : [];
    if (schema === null) {
      wrapper.appendChild(element("p", { class: "help", text:
        "This tool is not among the providers' known tools (refresh the provider, or check " +
        "server and tool): its args are edited as JSON below." }));
    }
    Object.keys(properties).forEach(function (name) {
      wrapper.appendChild(argField(node, name, properties[name] || {}, required.indexOf(name) >= 0, context));
    });
    var extra = {};
    Object.keys(node.args).forEach(function (name) { if (!(name in properties)) extra[name] = node.args[name]; });
    if (schema === null || Object.keys(extra).length) {
      wrapper.appendChild(jsonField(schema === null ? "args (JSON)" : "Arguments the schema does not list (JSON)",
        extra, model.pointerOf(context.doc, node.id, "args"), function (value) {
          Object.keys(extra).forEach(function (name) { delete node.args[name]; });
          Object.assign(node.args, value && typeof value === "object" ? value : {});
          context.changed();
        }));
    }
    wrapper.appendChild(problemsFor(model.pointerOf(context.doc, node.id, "args")));
    return wrapper;
  }

  // ---- One form a node type --------------------------------------------------------------
  function edgeSelects(node, context) {
    var box = element("div", { class: "panel-edges" });
    if (node.type === "exit") return box;
    if (node.type === "switch" || node.type === "approval") return box;
    box.appendChild(targetSelect("Next", node.next, context, function (target) {
      model.setTarget(context.doc, node.id, "next", target);
      context.changed({ shape: true });
    }));
    return box;
  }

  function switchForm(node, context) {
    var box = element("div", { class: "switch-form" });
    node.conditions = Array.isArray(node.conditions) ? node.conditions : [];
    node.conditions.forEach(function (condition, index) {
      var base = "conditions." + index;
      var group = element("fieldset", { class: "condition" }, [
        element("legend", { text: "Condition " + (index + 1) }),
      ]);
      if (condition.rule !== undefined) {
        group.appendChild(jsonField("Rule (JSON Logic; each var is a JSONata expression)", condition.rule,
          model.pointerOf(context.doc, node.id, base + ".rule"), function (value) {
            if (value === undefined) delete condition.rule;
            else condition.rule = value;
            context.changed();
          }));
      } else {
        group.appendChild(element("p", { class: "help", text: "No rule: taken when no condition before it holds." }));
      }
      group.appendChild(targetSelect("Then go to", condition.target, context, function (target) {
        if (target) condition.target = target;
        context.changed({ shape: true });
      }));
      group.appendChild(element("button", { type: "button", class: "button", text: "Remove condition " + (index + 1),
        onclick: function () {
          node.conditions.splice(index, 1);
          context.changed({ shape: true, panel: true });
        } }));
      box.appendChild(group);
    });
    box.appendChild(element("button", { type: "button", class: "button", text: "Add a condition",
      onclick: function () {
        node.conditions.push({ rule: { "==": [{ var: "$.entry" }, true] }, target: node.default || "" });
        context.changed({ shape: true, panel: true });
      } }));
    box.appendChild(targetSelect("Default (no condition holds)", node.default, context, function (target) {
      model.setTarget(context.doc, node.id, "default", target);
      context.changed({ shape: true });
    }));
    return box;
  }

  function approvalForm(node, context) {
    var box = element("div", { class: "approval-form" });
    box.appendChild(jsonataField("Message (JSONata; quote a fixed text: '\"Approve?\"')", node.message || "",
      model.pointerOf(context.doc, node.id, "message"), function (text) {
        node.message = text;
        context.changed();
      }, context));
    var approvers = fieldId();
    var select = element("select", { id: approvers, onchange: function () {
      node.approvers = select.value;
      context.changed();
    } });
    ["reviewers", "caller"].forEach(function (who) {
      var option = element("option", { value: who, text: who });
      if ((node.approvers || "reviewers") === who) option.selected = true;
      select.appendChild(option);
    });
    box.appendChild(element("div", { class: "panel-field inline" }, [element("label", { for: approvers, text: "Who decides" }), select]));
    box.appendChild(textField("Timeout (ms; empty waits until someone decides)", node.timeoutMs,
      model.pointerOf(context.doc, node.id, "timeoutMs"), function (text) {
        if (text.trim() === "") delete node.timeoutMs;
        else node.timeoutMs = Number(text);
        context.changed({ panel: true, shape: true, keepFocus: true });
      }, { inputmode: "numeric" }));
    box.appendChild(jsonField("Form (JSON Schema of what the person fills in)", node.form,
      model.pointerOf(context.doc, node.id, "form"), function (value) {
        if (value === undefined) delete node.form;
        else node.form = value;
        context.changed();
      }));
    node.routes = node.routes && typeof node.routes === "object" ? node.routes : {};
    model.DECISIONS.forEach(function (decision) {
      if (decision === "timeout" && node.timeoutMs === undefined && !node.routes.timeout) return;
      box.appendChild(targetSelect("When " + decision, node.routes[decision], context, function (target) {
        model.setTarget(context.doc, node.id, "routes." + decision, target);
        context.changed({ shape: true });
      }));
    });
    box.appendChild(problemsFor(model.pointerOf(context.doc, node.id, "routes")));
    return box;
  }

  function entryForm(context) {
    var tool = model.tool(context.doc);
    return element("div", {}, [
      element("p", { class: "help", text: "The entry receives the workflow's arguments: later nodes read them as $.<entry id>.<argument>." }),
      jsonField("The workflow's inputSchema (its arguments)", tool.inputSchema, "/tools/0/inputSchema", function (value) {
        tool.inputSchema = value === undefined ? { type: "object" } : value;
        context.changed();
      }),
    ]);
  }

  function exitForm(context) {
    var tool = model.tool(context.doc);
    return element("div", {}, [
      element("p", { class: "help", text: "The exit ends the run: its result is the output of the node before it." }),
      jsonField("The workflow's outputSchema (optional)", tool.outputSchema, "/tools/0/outputSchema", function (value) {
        if (value === undefined) delete tool.outputSchema;
        else tool.outputSchema = value;
        context.changed();
      }),
    ]);
  }

  // Another tool for an mcp node: one of those the palette's searches found. The args that
  // the new tool's inputSchema also has are kept; validation names the rest.
  function toolChoice(node, context) {
    var id = fieldId();
    var select = element("select", { id: id, class: "tool-change", onchange: function () {
      var chosen = context.toolChoices[Number(select.value)];
      if (!chosen) return;
      node.server = chosen.server;
      node.tool = chosen.tool;
      context.changed({ shape: true, panel: true });
    } });
    select.appendChild(element("option", { value: "", text: "(search the palette to list more)" }));
    context.toolChoices.forEach(function (tool, index) {
      if (tool.server === node.server && tool.tool === node.tool) return;
      select.appendChild(element("option", { value: String(index), text: tool.tool + " on " + tool.server }));
    });
    return element("div", { class: "panel-field inline" }, [
      element("label", { for: id, text: "Call another tool" }), select,
    ]);
  }

  // With no node selected: the workflow's own description and schemas.
  function workflowForm(container, context) {
    var tool = model.tool(context.doc);
    var id = fieldId();
    var description = element("textarea", { id: id, rows: 3, "data-pointer": "/tools/0/description" });
    description.value = tool.description || "";
    description.addEventListener("input", function () {
      tool.description = description.value;
      context.changed();
    });
    container.appendChild(element("h2", { text: "The workflow" }));
    container.appendChild(element("p", { class: "help", text:
      "Select a node on the canvas or in the list below to edit it here." }));
    container.appendChild(element("div", { class: "panel-field" }, [
      element("label", { for: id, text: "Description (what agents read in tools/list)" }), description,
      problemsFor("/tools/0/description"),
    ]));
    container.appendChild(entryForm(context));
    container.appendChild(exitForm(context));
  }

  // Draw the panel of node `context.nodeId` into `container`.
  function render(container, context) {
    container.innerHTML = "";
    var node = model.find(context.doc, context.nodeId);
    if (!node) {
      workflowForm(container, context);
      return;
    }
    var renameId = fieldId();
    var rename = element("input", { id: renameId, type: "text", value: node.id, "data-pointer": model.pointerOf(context.doc, node.id, "id") });
    rename.addEventListener("change", function () {
      try {
        model.renameNode(context.doc, node.id, rename.value.trim());
        context.select(rename.value.trim());
        context.changed({ shape: true, panel: true });
      } catch (error) {
        renameError.textContent = error.message;
      }
    });
    var renameError = element("div", { class: "field-problems local", "aria-live": "polite" });
    container.appendChild(element("h2", { text: node.type + " node" }));
    container.appendChild(element("div", { class: "panel-field" }, [
      element("label", { for: renameId, text: "Id (other nodes read it as $." + node.id + ")" }), rename, renameError,
      problemsFor(model.pointerOf(context.doc, node.id)),
    ]));
    if (node.type === "mcp") {
      container.appendChild(element("p", { class: "tool-name" }, [
        element("strong", { text: node.tool }), document.createTextNode(" on " + node.server),
      ]));
      container.appendChild(toolChoice(node, context));
      if (context.toolDescription) container.appendChild(element("p", { class: "help", text: context.toolDescription }));
      container.appendChild(element("h3", { text: "Arguments" }));
      container.appendChild(argsForm(node, context));
    } else if (node.type === "transform") {
      node.transform = node.transform && typeof node.transform === "object" ? node.transform : { expr: "" };
      container.appendChild(jsonataField("Transform (JSONata)", node.transform.expr || "",
        model.pointerOf(context.doc, node.id, "transform.expr"), function (text) {
          node.transform.expr = text;
          context.changed();
        }, context));
    } else if (node.type === "switch") {
      container.appendChild(switchForm(node, context));
    } else if (node.type === "approval") {
      container.appendChild(approvalForm(node, context));
    } else if (node.type === "entry") {
      container.appendChild(entryForm(context));
    } else if (node.type === "exit") {
      container.appendChild(exitForm(context));
    }
    container.appendChild(edgeSelects(node, context));
    container.appendChild(element("button", { type: "button", class: "button delete-node", text: "Delete node " + node.id,
      onclick: function () {
        model.removeNode(context.doc, node.id);
        context.select(null);
        context.changed({ shape: true, panel: true });
      } }));
  }

  // Show validation's problems under the fields they point into (the longest pointer that
  // a field of the panel has), and mark JSONata syntax errors at their character.
  function showProblems(container, problems) {
    var slots = Array.prototype.slice.call(container.querySelectorAll("[data-problems-for]"));
    slots.forEach(function (slot) { slot.innerHTML = ""; });
    Array.prototype.forEach.call(container.querySelectorAll(".jsonata-input"), function (area) {
      area.removeAttribute("data-error-at");
    });
    (problems || []).forEach(function (problem) {
      var best = null;
      slots.forEach(function (slot) {
        var pointer = slot.getAttribute("data-problems-for");
        var inside = problem.path === pointer || problem.path.indexOf(pointer + "/") === 0;
        if (inside && (!best || pointer.length > best.getAttribute("data-problems-for").length)) best = slot;
      });
      if (!best) return;
      var shown = element("p", { class: "problem " + problem.severity, text: problem.message + " " });
      if (problem.fix) {
        // The editor applies it (graphs/static/graphs/canvas/editor.js): one click here too.
        shown.appendChild(element("button", { type: "button", class: "button small apply-fix",
          "data-problem": String(problems.indexOf(problem)), text: "Apply fix" }));
      }
      best.appendChild(shown);
      var at = /\(at character (\d+)\)/.exec(problem.message);
      var area = container.querySelector('.jsonata-input[data-pointer="' + problem.path + '"]');
      if (at && area) area.setAttribute("data-error-at", String(Math.max(Number(at[1]) - 1, 0)));
    });
    Array.prototype.forEach.call(container.querySelectorAll(".jsonata-input"), function (area) {
      if (area.paint) area.paint();
    });
  }

  function showOffered(container, offered) {
    Array.prototype.forEach.call(container.querySelectorAll(".offered-picker"), function (select) {
      fillOffered(select, offered);
    });
  }

  window.SwitchyardCanvas.panel = {
    render: render,
    showProblems: showProblems,
    showOffered: showOffered,
    highlighted: highlighted,
    element: element,
  };
})();
