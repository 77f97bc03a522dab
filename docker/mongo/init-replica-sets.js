// Phase 1 of the cluster setup: initiate the config-server replica set and the
// shard replica sets.  Runs in the mongo-init-replsets container:
//   mongosh --nodb --quiet /scripts/init-replica-sets.js
// Topology comes from the environment (docker-compose.yml is the one source):
//   MONGO_CONFIG_REPLSET  "cfgrs/cfg1:27019"
//   MONGO_SHARD_REPLSETS  "shard1rs/shard1a:27018,shard1b:27018,shard1c:27018 shard2rs/..."
load("/scripts/common.js");

const TIMEOUT = Number(env("MONGO_INIT_TIMEOUT", "300"));

function initiate(spec, configsvr) {
  const rs = parseReplSet(spec);
  // Every member must answer before replSetInitiate, or the initiate fails.
  const conns = rs.hosts.map((h) => connectWithRetry(`mongodb://${h}/?directConnection=true`, TIMEOUT));
  const admin = conns[0].getDB("admin");
  const status = command(admin, { replSetGetStatus: 1 });
  if (status.ok === 1) {
    print(`${rs.id}: already initiated`);
  } else if (status.code === 94 /* NotYetInitialized */) {
    const config = {
      _id: rs.id,
      members: rs.hosts.map((host, i) => ({ _id: i, host: host, priority: i === 0 ? 2 : 1 })),
    };
    if (configsvr) config.configsvr = true;
    const reply = command(admin, { replSetInitiate: config });
    if (reply.ok !== 1 && reply.code !== 23 /* AlreadyInitialized */) {
      throw new Error(`${rs.id}: replSetInitiate failed: ${tojson(reply)}`);
    }
    print(`${rs.id}: initiated with ${rs.hosts.join(", ")}`);
  } else {
    throw new Error(`${rs.id}: replSetGetStatus failed: ${tojson(status)}`);
  }
  const primary = waitFor(`a primary in ${rs.id}`, TIMEOUT, () => {
    const s = command(admin, { replSetGetStatus: 1 });
    const p = s.ok === 1 ? s.members.find((m) => m.stateStr === "PRIMARY") : undefined;
    return p ? p.name : null;
  });
  print(`${rs.id}: primary is ${primary}`);
}

initiate(env("MONGO_CONFIG_REPLSET"), true);
env("MONGO_SHARD_REPLSETS").split(/\s+/).filter((s) => s).forEach((spec) => initiate(spec, false));
print("replica sets ready");
