// Helpers shared by the cluster init scripts (loaded with load()).  mongosh >= 2.
// Every step is idempotent: the init containers can be re-run at any time.

function env(name, fallback) {
  const value = process.env[name];
  if (value === undefined || value === "") {
    if (fallback === undefined) throw new Error(`environment variable ${name} is not set`);
    return fallback;
  }
  return value;
}

// "rsName/host1:port,host2:port" -> {id, hosts}
function parseReplSet(spec) {
  const slash = spec.indexOf("/");
  if (slash <= 0) throw new Error(`bad replica set spec "${spec}": want name/host:port,host:port,...`);
  return { id: spec.slice(0, slash), hosts: spec.slice(slash + 1).split(",").filter((h) => h) };
}

// A command's reply; server errors come back as {ok: 0, code, codeName, errmsg}
// (mongosh throws them), network errors are thrown.
function command(db, cmd) {
  try {
    return db.runCommand(cmd);
  } catch (e) {
    if (typeof e.code === "number") return { ok: 0, code: e.code, codeName: e.codeName, errmsg: e.message };
    throw e;
  }
}

function connectWithRetry(uri, timeoutSeconds) {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    try {
      const conn = new Mongo(uri);
      const reply = conn.getDB("admin").runCommand({ ping: 1 });
      if (reply.ok === 1) return conn;
      throw new Error(tojson(reply));
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${uri} did not answer within ${timeoutSeconds}s: ${e.message}`);
      print(`waiting for ${uri}: ${e.message}`);
      sleep(2000);
    }
  }
}

function waitFor(what, timeoutSeconds, check) {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const result = check();
    if (result) return result;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutSeconds}s waiting for ${what}`);
    sleep(1000);
  }
}
