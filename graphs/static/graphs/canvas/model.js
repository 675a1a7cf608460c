// The canvas editor's model: the graph document (seed 003's format, nested form) and the
// changes an author makes to it. Every view (the canvas, the accessible list, the side panel,
// the YAML) reads the one document and changes it only through these functions, so they
// cannot disagree. Node fields and edge names are the engine's (graphs/engine/definition.py
// `Node.targets`).
(function () {
  "use strict";

  var TYPES = ["entry", "mcp", "transform", "switch", "approval", "exit"];
  var DECISIONS = ["approved", "rejected", "timeout"];
  var ID = /^[A-Za-z_][A-Za-z0-9_]*$/;

  function blank(name, group) {
    return {
      version: "1.0",
      server: { name: group || "", version: "1.0.0" },
      tools: [
        {
          name: name || "",
          description: "",
          inputSchema: { type: "object", properties: {} },
          nodes: [],
        },
      ],
    };
  }

  function tool(doc) {
    if (!Array.isArray(doc.tools) || !doc.tools.length || typeof doc.tools[0] !== "object") {
      doc.tools = [{ name: "", description: "", inputSchema: { type: "object" }, nodes: [] }];
    }
    var first = doc.tools[0];
    if (!Array.isArray(first.nodes)) first.nodes = [];
    return first;
  }

  function nodes(doc) {
    return tool(doc).nodes.filter(function (node) {
      return node && typeof node === "object";
    });
  }

  function find(doc, id) {
    return nodes(doc).filter(function (node) { return node.id === id; })[0] || null;
  }

  function indexOf(doc, id) {
    return tool(doc).nodes.findIndex(function (node) { return node && node.id === id; });
  }

  // The edges out of a node: [{field, target, label}], field as the engine names it.
  function edgesOf(node) {
    var edges = [];
    if (typeof node.next === "string") edges.push({ field: "next", target: node.next, label: "" });
    (Array.isArray(node.conditions) ? node.conditions : []).forEach(function (condition, index) {
      if (condition && typeof condition.target === "string") {
        var label = condition.rule === undefined ? "otherwise" : "if " + (index + 1);
        edges.push({ field: "conditions[" + index + "].target", target: condition.target, label: label });
      }
    });
    if (typeof node.default === "string") {
      edges.push({ field: "default", target: node.default, label: "default" });
    }
    if (node.routes && typeof node.routes === "object") {
      Object.keys(node.routes).forEach(function (decision) {
        if (typeof node.routes[decision] === "string") {
          edges.push({ field: "routes." + decision, target: node.routes[decision], label: decision });
        }
      });
    }
    return edges;
  }

  function edges(doc) {
    var all = [];
    nodes(doc).forEach(function (node) {
      edgesOf(node).forEach(function (edge) {
        all.push({ source: node.id, field: edge.field, target: edge.target, label: edge.label });
      });
    });
    return all;
  }

  function freeId(doc, base) {
    base = String(base || "node").replace(/[^A-Za-z0-9_]/g, "_").replace(/^([0-9])/, "_$1");
    var taken = {};
    nodes(doc).forEach(function (node) { taken[node.id] = true; });
    if (!taken[base]) return base;
    for (var n = 2; ; n++) {
      if (!taken[base + "_" + n]) return base + "_" + n;
    }
  }

  // A new node of `type`; `tool` ({server, tool}) for an mcp node. Returns its id.
  function addNode(doc, type, options) {
    options = options || {};
    if (TYPES.indexOf(type) < 0) throw new Error("Unknown node type " + type);
    var base = options.id || (type === "mcp" ? options.tool + "_node" : type);
    var node = { id: freeId(doc, base), type: type };
    if (type === "mcp") {
      node.server = options.server;
      node.tool = options.tool;
      node.args = {};
    } else if (type === "transform") {
      node.transform = { expr: "$" };
    } else if (type === "switch") {
      node.conditions = [];
    } else if (type === "approval") {
      node.message = '"Approve?"';
      node.approvers = "reviewers";
      node.routes = {};
    }
    tool(doc).nodes.push(node);
    return node.id;
  }

  // Connect `source` to `target`: its `next`, or for a switch its default first and then a
  // new condition, for an approval its first decision without a route. Returns the field
  // set, or throws saying why it cannot be.
  function connect(doc, source, target) {
    var node = find(doc, source);
    if (!node || !find(doc, target)) throw new Error("Both nodes must exist.");
    if (node.type === "exit") throw new Error("An exit ends the run: it has no edges out.");
    if (node.type === "switch") {
      if (typeof node.default !== "string") {
        node.default = target;
        return "default";
      }
      node.conditions = Array.isArray(node.conditions) ? node.conditions : [];
      node.conditions.push({ rule: { "==": [{ var: "$.entry" }, true] }, target: target });
      return "conditions[" + (node.conditions.length - 1) + "].target";
    }
    if (node.type === "approval") {
      node.routes = node.routes && typeof node.routes === "object" ? node.routes : {};
      var wanted = DECISIONS.filter(function (decision) {
        return decision !== "timeout" || node.timeoutMs !== undefined;
      });
      var free = wanted.filter(function (decision) { return !(decision in node.routes); })[0];
      if (!free) throw new Error("Each decision has its route: change one in the panel.");
      node.routes[free] = target;
      return "routes." + free;
    }
    node.next = target;
    return "next";
  }

  function disconnect(doc, source, field) {
    var node = find(doc, source);
    if (!node) return;
    var condition = /^conditions\[(\d+)\]\.target$/.exec(field);
    if (field === "next") delete node.next;
    else if (field === "default") delete node.default;
    else if (condition) node.conditions.splice(Number(condition[1]), 1);
    else if (field.indexOf("routes.") === 0) delete node.routes[field.slice(7)];
  }

  function setTarget(doc, source, field, target) {
    var node = find(doc, source);
    var condition = /^conditions\[(\d+)\]\.target$/.exec(field);
    if (!target) return disconnect(doc, source, field);
    if (field === "next") node.next = target;
    else if (field === "default") node.default = target;
    else if (condition) node.conditions[Number(condition[1])].target = target;
    else if (field.indexOf("routes.") === 0) {
      node.routes = node.routes || {};
      node.routes[field.slice(7)] = target;
    }
  }

  function removeNode(doc, id) {
    var list = tool(doc).nodes;
    var at = indexOf(doc, id);
    if (at >= 0) list.splice(at, 1);
    nodes(doc).forEach(function (node) {
      edgesOf(node).slice().reverse().forEach(function (edge) {
        if (edge.target === id) disconnect(doc, node.id, edge.field);
      });
    });
  }

  // Rename a node: its edges in, and `$.old` in every expression, follow.
  function renameNode(doc, old, renamed) {
    if (!ID.test(renamed)) {
      throw new Error("A node id is letters, digits and underscores, not starting with a digit.");
    }
    if (find(doc, renamed)) throw new Error("Another node is named " + renamed + ".");
    var reference = new RegExp("\\$\\." + old + "(?![A-Za-z0-9_])", "g");
    function rewrite(value) {
      if (typeof value === "string") return value.replace(reference, "$." + renamed);
      if (Array.isArray(value)) return value.map(rewrite);
      if (value && typeof value === "object") {
        Object.keys(value).forEach(function (key) { value[key] = rewrite(value[key]); });
      }
      return value;
    }
    nodes(doc).forEach(function (node) {
      edgesOf(node).forEach(function (edge) {
        if (edge.target === old) setTarget(doc, node.id, edge.field, renamed);
      });
      Object.keys(node).forEach(function (key) {
        if (key !== "id" && key !== "type") node[key] = rewrite(node[key]);
      });
    });
    find(doc, old).id = renamed;
  }

  // RFC 6901 and the RFC 6902 operations validation's fixes use (add, remove, replace,
  // move, copy, test), applied to `doc` in place; throws when a path does not resolve.
  function keys(pointer) {
    if (pointer === "") return [];
    return pointer.slice(1).split("/").map(function (key) {
      return key.replace(/~1/g, "/").replace(/~0/g, "~");
    });
  }

  function resolve(doc, pointer) {
    var path = keys(pointer);
    var parent = doc;
    for (var i = 0; i < path.length - 1; i++) {
      parent = parent[Array.isArray(parent) ? Number(path[i]) : path[i]];
      if (parent === null || typeof parent !== "object") throw new Error("No " + pointer);
    }
    return { parent: parent, key: path[path.length - 1] };
  }

  function get(doc, pointer) {
    var at = resolve(doc, pointer);
    return Array.isArray(at.parent) ? at.parent[Number(at.key)] : at.parent[at.key];
  }

  function put(doc, pointer, value, insert) {
    var at = resolve(doc, pointer);
    if (!Array.isArray(at.parent)) at.parent[at.key] = value;
    else if (at.key === "-") at.parent.push(value);
    else at.parent.splice(Number(at.key), insert ? 0 : 1, value);
  }

  function remove(doc, pointer) {
    var at = resolve(doc, pointer);
    if (Array.isArray(at.parent)) at.parent.splice(Number(at.key), 1);
    else delete at.parent[at.key];
  }

  function applyPatch(doc, patch) {
    patch.forEach(function (op) {
      var copied = function (value) { return JSON.parse(JSON.stringify(value)); };
      if (op.op === "add") put(doc, op.path, copied(op.value), true);
      else if (op.op === "replace") put(doc, op.path, copied(op.value), false);
      else if (op.op === "remove") remove(doc, op.path);
      else if (op.op === "move" || op.op === "copy") {
        var value = copied(get(doc, op.from));
        if (op.op === "move") remove(doc, op.from);
        put(doc, op.path, value, true);
      } else if (op.op === "test") {
        if (JSON.stringify(get(doc, op.path)) !== JSON.stringify(op.value)) {
          throw new Error("The definition changed since the fix was offered.");
        }
      }
    });
  }

  // The node a problem's pointer is inside (nested form: /tools/0/nodes/<i>/...).
  function nodeOfPointer(doc, pointer) {
    var match = /^\/tools\/0\/nodes\/(\d+)(\/|$)/.exec(pointer || "");
    if (!match) return null;
    var node = tool(doc).nodes[Number(match[1])];
    return node && typeof node === "object" ? node.id : null;
  }

  function pointerOf(doc, id, field) {
    return "/tools/0/nodes/" + indexOf(doc, id) + (field ? "/" + field.split(".").join("/") : "");
  }

  window.SwitchyardCanvas = window.SwitchyardCanvas || {};
  window.SwitchyardCanvas.model = {
    TYPES: TYPES,
    DECISIONS: DECISIONS,
    blank: blank,
    tool: tool,
    nodes: nodes,
    find: find,
    edges: edges,
    edgesOf: edgesOf,
    addNode: addNode,
    connect: connect,
    disconnect: disconnect,
    setTarget: setTarget,
    removeNode: removeNode,
    renameNode: renameNode,
    applyPatch: applyPatch,
    get: get,
    nodeOfPointer: nodeOfPointer,
    pointerOf: pointerOf,
  };
})();
