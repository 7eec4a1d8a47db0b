//! Redis Cluster: which node serves a key, and a command connection that
//! sends each command there.
//!
//! `redis+cluster://[user:password@]host:port[,host:port…]`, or
//! `rediss+cluster://…` for TLS to every node. The slot map (CLUSTER SLOTS)
//! is read from any node that answers, first the ones named in the URL, and
//! shared by every connection of a client. A command goes to the node
//! serving the slot of its key (for scripts, the first of KEYS); MOVED sends
//! it on and has the map read again; ASK sends it on once, after ASKING.
//! A pipeline goes whole to the node of its first keyed command and is sent
//! on the same way when its keyed commands were all redirected.
//! Each node is reached over a [`Wire`], so a signal never makes a command
//! be sent twice. Keyless commands go to any node.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use crate::net::wire::{Tls, Wire};
use crate::protocol;
use crate::sync::locked;

/// How long a slot map is trusted for choosing a waiter's node (commands
/// use it at any age: a wrong node answers MOVED).
const SLOT_MAP_AGE: Duration = Duration::from_secs(5);

/// How long a node that failed a command is asked for the slot map last.
const SUSPECT_FOR: Duration = Duration::from_secs(10);

/// How long a keyed command waits for its node's reply before the client
/// asks another node whether that one still serves the slot, and again as
/// often while it waits: a frozen master that a replica replaced is left
/// within that of the promotion, and a reply it sends after being resumed
/// (a lock granted from a stale copy) is never taken.
const PROBE_AFTER: Duration = Duration::from_millis(200);

/// Redirections one command follows at most (a slot moving twice while the
/// command is underway is already rare).
const MAX_REDIRECTS: usize = 5;

/// How to reach the nodes, and the slot map they last gave.
pub(crate) struct Cluster {
    /// `redis://[user:password@]` (`rediss://…` for TLS): every node's URL
    /// begins so.
    auth: String,
    /// `host:port` of the nodes named in the URL.
    seeds: Vec<String>,
    tls: Option<Tls>,
    slots: Mutex<SlotMap>,
    /// Told when a command finds that a node it waited for lost a slot
    /// (see `PROBE_AFTER`): the node, and the slot.
    moved: Mutex<Vec<MovedHook>>,
}

/// See [`Cluster::on_moved`].
pub(crate) type MovedHook = Arc<dyn Fn(&str, u16) + Send + Sync>;

/// When the map was read (`None`: to be read again), and its ranges of
/// slots with their masters' `host:port`.
#[derive(Default)]
struct SlotMap {
    read: Option<Instant>,
    ranges: Vec<(u16, u16, String)>,
    /// Nodes that failed a command lately, and when: asked for the map
    /// last (a frozen node would hold each reading up for a timeout).
    suspects: Vec<(String, Instant)>,
}

impl SlotMap {
    fn node(&self, slot: u16) -> Option<&str> {
        self.ranges
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .map(|(_, _, n)| n.as_str())
    }
}

impl Cluster {
    /// `auth`: `redis://[user:password@]` (`rediss://…` with `tls`);
    /// `seeds`: the URL's `host:port`s.
    pub(crate) fn new(auth: String, seeds: Vec<String>, tls: Option<Tls>) -> Cluster {
        Cluster {
            auth,
            seeds,
            tls,
            slots: Mutex::new(SlotMap::default()),
            moved: Mutex::new(Vec::new()),
        }
    }

    /// Call `hook` (on a thread of its own) each time a command finds that
    /// the node it waited for lost the slot to another.
    pub(crate) fn on_moved(&self, hook: MovedHook) {
        locked(&self.moved).push(hook);
    }

    fn tell_moved(&self, node: &str, slot: u16) {
        for hook in locked(&self.moved).iter() {
            let (hook, node) = (hook.clone(), node.to_string());
            let _ = crate::sync::spawn_quiet("redislock-slot", move || hook(&node, slot));
        }
    }

    /// `cluster host:port,…`: safe to print.
    pub(crate) fn describe(&self) -> String {
        let tls = if self.tls.is_some() { " (TLS)" } else { "" };
        format!("cluster {}{tls}", self.seeds.join(","))
    }

    /// Forget the map: the next command reads it again.
    fn invalidate(&self) {
        locked(&self.slots).read = None;
    }

    /// The node the map gives for `slot`, if the map was read and (with
    /// `max_age`) is that recent.
    fn known(&self, slot: u16, max_age: Option<Duration>) -> Option<String> {
        let map = locked(&self.slots);
        let read = map.read?;
        if max_age.is_some_and(|age| read.elapsed() >= age) {
            return None;
        }
        map.node(slot).map(str::to_string)
    }

    /// The node the last map read gives for `slot`, however old.
    pub(crate) fn owner(&self, slot: u16) -> Option<String> {
        locked(&self.slots).node(slot).map(str::to_string)
    }

    /// The first slot the last map read gives to `node`, if any.
    pub(crate) fn first_slot_of(&self, node: &str) -> Option<u16> {
        let map = locked(&self.slots);
        map.ranges
            .iter()
            .filter(|(_, _, n)| n == node)
            .map(|(a, _, _)| *a)
            .min()
    }

    /// A connection to `node` (`host:port`).
    pub(crate) fn connect(
        &self,
        node: &str,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> RedisResult<Wire> {
        let info = redis::IntoConnectionInfo::into_connection_info(
            format!("{}{node}", self.auth).as_str(),
        )?;
        Wire::connect(&info, self.tls.as_ref(), connect_timeout, timeout)
    }
}

impl Cluster {
    /// Whether a node of the cluster answers: the slot map is read again
    /// from the first that does (nodes that failed lately are asked last).
    pub(crate) fn answers(self: &Arc<Self>, connect_timeout: Duration, timeout: Duration) -> bool {
        let mut con = Routed {
            cluster: self.clone(),
            nodes: Vec::new(),
            connect_timeout,
            timeout,
        };
        con.refresh().is_ok()
    }

    /// Make sure the slot map is at most `max_age` old and was read after
    /// `except` last failed a command, reading it again (from another node
    /// than `except`) if not.
    pub(crate) fn recent(
        self: &Arc<Self>,
        max_age: Duration,
        except: Option<&str>,
        connect_timeout: Duration,
        timeout: Duration,
    ) {
        {
            let map = locked(&self.slots);
            let failed = map
                .suspects
                .iter()
                .filter(|(n, _)| Some(n.as_str()) == except)
                .map(|(_, at)| *at)
                .max();
            let fresh = map
                .read
                .is_some_and(|r| r.elapsed() < max_age && failed.is_none_or(|f| r > f));
            if fresh {
                return;
            }
        }
        let mut con = Routed {
            cluster: self.clone(),
            nodes: Vec::new(),
            connect_timeout,
            timeout,
        };
        let _ = con.refresh_except(except);
    }

    /// `node` failed a command: forget the map, and ask that node for the
    /// next one last.
    fn failed(&self, node: &str) {
        let mut map = locked(&self.slots);
        map.read = None;
        map.suspects
            .retain(|(n, at)| n != node && at.elapsed() < SUSPECT_FOR);
        map.suspects.push((node.to_string(), Instant::now()));
    }

    /// The masters' `host:port`s, as the first of the URL's nodes to answer
    /// lists them (`CLUSTER NODES`), failed ones included.
    pub(crate) fn masters(
        &self,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> RedisResult<Vec<String>> {
        let mut last = None;
        for seed in &self.seeds {
            let nodes = self
                .connect(seed, connect_timeout, timeout)
                .and_then(|mut w| redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut w));
            match nodes {
                Ok(text) => return Ok(parse_masters(&text, seed)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "the cluster URL names no node",
            ))
        }))
    }
}

/// The masters of a CLUSTER NODES reply from `from` (whose host stands in
/// for a node announced without one): lines of `id host:port@cport[,name]
/// flags …`.
fn parse_masters(text: &str, from: &str) -> Vec<String> {
    let from_host = from.rsplit_once(':').map_or(from, |(h, _)| h);
    let mut masters = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        if !flags.contains(&"master") || flags.contains(&"noaddr") {
            continue;
        }
        let addr = addr.split(['@', ',']).next().unwrap_or_default();
        let Some((host, port)) = addr.rsplit_once(':') else {
            continue;
        };
        let host = if host.is_empty() { from_host } else { host };
        masters.push(format!("{host}:{port}"));
    }
    masters.sort();
    masters
}

/// A command connection to a cluster: one [`Wire`] per node it has used.
pub(crate) struct Routed {
    cluster: Arc<Cluster>,
    nodes: Vec<(String, Wire)>,
    connect_timeout: Duration,
    timeout: Duration,
}

impl Routed {
    /// Connect to a node that answers and make sure the slot map is known.
    pub(crate) fn connect(
        cluster: Arc<Cluster>,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let mut con = Routed {
            cluster,
            nodes: Vec::new(),
            connect_timeout,
            timeout,
        };
        if locked(&con.cluster.slots).read.is_none() {
            con.refresh()?;
        } else {
            con.any()?;
        }
        Ok(con)
    }

    /// Bound each later send and reply by `timeout`.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        self.timeout = timeout;
        for (_, wire) in &mut self.nodes {
            wire.set_timeout(timeout)?;
        }
        Ok(())
    }

    /// The node serving `key`'s slot by a map at most a few seconds old
    /// (read again if older), for a waiter's subscriber.
    pub(crate) fn node_for(&mut self, key: &[u8]) -> RedisResult<String> {
        let slot = protocol::slot(key);
        if let Some(node) = self.cluster.known(slot, Some(SLOT_MAP_AGE)) {
            return Ok(node);
        }
        self.refresh()?;
        self.serving(slot)
    }

    /// The node serving `slot`, reading the map if it has to.
    fn serving(&mut self, slot: u16) -> RedisResult<String> {
        if let Some(node) = self.cluster.known(slot, None) {
            return Ok(node);
        }
        self.refresh()?;
        self.cluster.known(slot, None).ok_or_else(|| {
            RedisError::from((
                ErrorKind::Server(ServerErrorKind::ClusterDown),
                "no cluster node serves the lock's slot",
                format!("slot {slot}"),
            ))
        })
    }

    /// Read the slot map from the first node that answers: a node already
    /// connected, then the nodes of the old map, then the URL's.
    fn refresh(&mut self) -> RedisResult<()> {
        self.refresh_except(None)
    }

    /// [`Routed::refresh`] from another node than `except`.
    fn refresh_except(&mut self, except: Option<&str>) -> RedisResult<()> {
        let mut candidates: Vec<String> = self.nodes.iter().map(|(n, _)| n.clone()).collect();
        let suspects: Vec<String> = {
            let map = locked(&self.cluster.slots);
            candidates.extend(map.ranges.iter().map(|(_, _, n)| n.clone()));
            map.suspects
                .iter()
                .filter(|(_, at)| at.elapsed() < SUSPECT_FOR)
                .map(|(n, _)| n.clone())
                .collect()
        };
        candidates.extend(self.cluster.seeds.iter().cloned());
        // Stable: the order above, the suspects last.
        candidates.sort_by_key(|n| suspects.contains(n));
        let mut last = None;
        let mut tried = Vec::new();
        for node in candidates {
            if tried.contains(&node) || except == Some(node.as_str()) {
                continue;
            }
            tried.push(node.clone());
            let reply = self
                .wire(&node)
                .and_then(|w| redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(w));
            match reply {
                Ok(reply) => {
                    let mut map = locked(&self.cluster.slots);
                    map.ranges = parse_slots(reply, &node);
                    map.read = Some(Instant::now());
                    return Ok(());
                }
                Err(e) => {
                    self.drop_node(&node);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "the cluster URL names no node",
            ))
        }))
    }

    /// A node to send a keyless command to: one already connected, else
    /// the first that accepts a connection.
    fn any(&mut self) -> RedisResult<String> {
        if let Some((node, _)) = self.nodes.first() {
            return Ok(node.clone());
        }
        let mut candidates: Vec<String> = {
            let map = locked(&self.cluster.slots);
            map.ranges.iter().map(|(_, _, n)| n.clone()).collect()
        };
        candidates.extend(self.cluster.seeds.iter().cloned());
        let mut last = None;
        for node in candidates {
            match self.wire(&node) {
                Ok(_) => return Ok(node),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "the cluster URL names no node",
            ))
        }))
    }

    /// The connection to `node`, opened if needed.
    fn wire(&mut self, node: &str) -> RedisResult<&mut Wire> {
        let i = match self.nodes.iter().position(|(n, _)| n == node) {
            Some(i) => i,
            None => {
                let wire = self
                    .cluster
                    .connect(node, self.connect_timeout, self.timeout)?;
                self.nodes.push((node.to_string(), wire));
                self.nodes.len() - 1
            }
        };
        Ok(&mut self.nodes[i].1)
    }

    fn drop_node(&mut self, node: &str) {
        self.nodes.retain(|(n, _)| n != node);
    }

    /// Send the pipeline `cmd` to `node` (with ASKING before each of the
    /// commands numbered in `asking`, whose replies are left out) and read
    /// its replies.
    fn pipeline_to(
        &mut self,
        node: &str,
        cmd: &[u8],
        offset: usize,
        count: usize,
        asking: Option<&[usize]>,
    ) -> RedisResult<Vec<Value>> {
        let wire = self.wire(node)?;
        let Some(asking) = asking else {
            return wire.req_packed_commands(cmd, offset, count);
        };
        let ask = redis::cmd("ASKING").get_packed_command();
        let parts = commands(cmd);
        let mut packed = Vec::with_capacity(cmd.len() + asking.len() * ask.len());
        for (i, one) in parts.iter().enumerate() {
            if asking.contains(&i) {
                packed.extend_from_slice(&ask);
            }
            packed.extend_from_slice(one);
        }
        let mut replies = wire
            .req_packed_commands(&packed, 0, parts.len() + asking.len())?
            .into_iter();
        // Each ASKING's reply comes just before its command's: left out.
        let mut kept = Vec::with_capacity(parts.len());
        for i in 0..parts.len() {
            if asking.contains(&i) {
                replies.next();
            }
            kept.extend(replies.next());
        }
        Ok(kept)
    }

    /// Send `cmd` to `node` (preceded by ASKING if `asking`) and read its
    /// reply. A connection that fails is dropped and the map read again
    /// next time: the node may have died in a failover. A command for
    /// `slot` whose reply is late (see `PROBE_AFTER`) is abandoned when
    /// another node's map shows `node` replaced: [`Answer::Moved`].
    fn send_to(
        &mut self,
        node: &str,
        cmd: &[u8],
        asking: bool,
        slot: Option<u16>,
    ) -> RedisResult<Answer> {
        let r = self.exchange(node, cmd, asking, slot.filter(|_| !asking));
        if r.is_err() {
            self.drop_node(node);
            self.cluster.failed(node);
        }
        r
    }

    fn exchange(
        &mut self,
        node: &str,
        cmd: &[u8],
        asking: bool,
        slot: Option<u16>,
    ) -> RedisResult<Answer> {
        let sent = Instant::now();
        let deadline = sent + self.timeout;
        let wire = self.wire(node)?;
        if asking {
            let mut both = redis::cmd("ASKING").get_packed_command();
            both.extend_from_slice(cmd);
            return wire
                .req_packed_commands(&both, 1, 1)
                .map(|mut v| Answer::Reply(v.remove(0)));
        }
        let Some(slot) = slot else {
            return wire.req_packed_command(cmd).map(Answer::Reply);
        };
        wire.send_command(cmd)?;
        loop {
            let by = (Instant::now() + PROBE_AFTER).min(deadline);
            let reply = self.wire(node)?.reply_if_by(by)?;
            // Replaced: another node serves the slot and this one serves
            // none (a replica took them all over). A node that still
            // serves slots gave a true reply even if the slot migrated.
            if sent.elapsed() >= PROBE_AFTER && self.refresh_except(Some(node)).is_ok() {
                let owner = self.cluster.owner(slot).filter(|o| o != node);
                if let Some(owner) = owner.filter(|_| self.cluster.first_slot_of(node).is_none()) {
                    tracing::debug!(
                        node,
                        slot,
                        owner = %owner,
                        "the node a command waited for lost the slot: sent to its new owner"
                    );
                    // Its reply, if it comes, is from a copy being replaced.
                    self.drop_node(node);
                    self.cluster.tell_moved(node, slot);
                    return Ok(Answer::Moved(owner));
                }
            }
            match reply {
                Some(v) => return Ok(Answer::Reply(v)),
                None if Instant::now() >= deadline => {
                    return Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into())
                }
                None => {}
            }
        }
    }
}

/// What a node did with a command.
enum Answer {
    Reply(Value),
    /// Abandoned: the node lost the slot to this one (see `PROBE_AFTER`).
    Moved(String),
}

impl ConnectionLike for Routed {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let slot = command_slot(cmd);
        let mut node = match slot {
            Some(slot) => self.serving(slot)?,
            None => self.any()?,
        };
        let mut asking = false;
        let mut redirects = 0;
        loop {
            let reply = match self.send_to(&node, cmd, asking, slot)? {
                Answer::Reply(reply) => reply,
                Answer::Moved(to) if redirects < MAX_REDIRECTS => {
                    (node, asking) = (to, false);
                    redirects += 1;
                    continue;
                }
                Answer::Moved(_) => {
                    return Err(RedisError::from((
                        ErrorKind::Server(ServerErrorKind::ClusterDown),
                        "the lock's slot kept moving while the command waited",
                        format!("slot {}", slot.unwrap_or_default()),
                    )))
                }
            };
            match redirect(&reply) {
                Some((ask, to)) if slot.is_some() && redirects < MAX_REDIRECTS => {
                    if !ask {
                        // The slot moved for good: read the map again
                        // before the next command.
                        self.cluster.invalidate();
                    }
                    node = to;
                    asking = ask;
                    redirects += 1;
                }
                _ => return Ok(reply),
            }
        }
    }

    /// A pipeline goes whole to the node of its first keyed command; its
    /// commands must share that slot (redislock sends none that do not).
    /// When every keyed command was redirected to one node (none of them
    /// ran), the whole pipeline is sent there, after ASKING for each keyed
    /// command on ASK: its keyless commands then run again, so they must be
    /// harmless to repeat (redislock's are WAIT).
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let parts = commands(cmd);
        let slots: Vec<Option<u16>> = parts.iter().map(|c| command_slot(c)).collect();
        let keyed: Vec<usize> = (0..parts.len()).filter(|&i| slots[i].is_some()).collect();
        let mut node = match slots.iter().find_map(|s| *s) {
            Some(slot) => self.serving(slot)?,
            None => self.any()?,
        };
        let mut asking = false;
        let mut redirects = 0;
        loop {
            let replies = self.pipeline_to(
                &node,
                cmd,
                offset,
                count,
                asking.then_some(keyed.as_slice()),
            );
            let values = match replies {
                Ok(values) => values,
                Err(e) => {
                    self.drop_node(&node);
                    self.cluster.failed(&node);
                    return Err(e);
                }
            };
            if !values.iter().any(|v| redirect(v).is_some()) {
                return Ok(values);
            }
            // Which reply belongs to which command: only without MULTI.
            let redirected: Vec<Option<(bool, String)>> = if offset == 0 {
                keyed
                    .iter()
                    .map(|&i| values.get(i).and_then(redirect))
                    .collect()
            } else {
                Vec::new()
            };
            let all_to_one = match redirected.first() {
                Some(Some(first)) => redirected.iter().all(|r| r.as_ref() == Some(first)),
                _ => false,
            };
            if !all_to_one || redirects >= MAX_REDIRECTS {
                self.cluster.invalidate();
                return Ok(values);
            }
            let Some(Some((ask, to))) = redirected.into_iter().next() else {
                return Ok(values);
            };
            if !ask {
                self.cluster.invalidate();
            }
            node = to;
            asking = ask;
            redirects += 1;
        }
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.nodes.iter().all(|(_, w)| w.is_open())
    }
}

/// `(true for ASK, "host:port")` if `reply` redirects the command.
fn redirect(reply: &Value) -> Option<(bool, String)> {
    let Value::ServerError(e) = reply else {
        return None;
    };
    let ask = match e.kind()? {
        ServerErrorKind::Ask => true,
        ServerErrorKind::Moved => false,
        _ => return None,
    };
    // "<slot> <host>:<port>"
    let to = e.details()?.split_ascii_whitespace().nth(1)?;
    Some((ask, to.to_string()))
}

/// The ranges of a CLUSTER SLOTS reply from `from` (whose host stands in
/// for a master announced without one).
fn parse_slots(reply: Value, from: &str) -> Vec<(u16, u16, String)> {
    let from_host = from.rsplit_once(':').map_or(from, |(h, _)| h);
    let mut ranges = Vec::new();
    let Value::Array(items) = reply else {
        return ranges;
    };
    for item in items {
        let Value::Array(parts) = item else { continue };
        let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(master))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            continue;
        };
        let host = match master.first() {
            Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::SimpleString(h)) => h.clone(),
            _ => continue,
        };
        let host = if host.is_empty() || host == "?" {
            from_host.to_string()
        } else {
            host
        };
        if let Some(Value::Int(port)) = master.get(1) {
            ranges.push((*a as u16, *b as u16, format!("{host}:{port}")));
        }
    }
    ranges
}

/// The arguments of each command in a packed pipeline (RESP arrays of bulk
/// strings, as redis-rs packs them).
fn commands(packed: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = packed;
    while !rest.is_empty() {
        match split_command(rest) {
            Some((one, tail)) => {
                out.push(one);
                rest = tail;
            }
            None => break,
        }
    }
    out
}

/// The first packed command of `packed`, and what follows it.
fn split_command(packed: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_, end) = args(packed, 0)?;
    Some(packed.split_at(end))
}

/// Up to `limit` arguments of the packed command at the start of `packed`,
/// and the length of the whole command.
fn args(packed: &[u8], limit: usize) -> Option<(Vec<&[u8]>, usize)> {
    let (n, mut pos) = number(packed, b'*')?;
    let mut out = Vec::new();
    for _ in 0..n {
        let (len, after) = number(&packed[pos..], b'$')?;
        let start = pos + after;
        let end = start.checked_add(len)?;
        if packed.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        if out.len() < limit {
            out.push(&packed[start..end]);
        }
        pos = end + 2;
    }
    Some((out, pos))
}

/// `<prefix><decimal>\r\n` at the start of `bytes`: the number and the
/// length read.
fn number(bytes: &[u8], prefix: u8) -> Option<(usize, usize)> {
    if bytes.first() != Some(&prefix) {
        return None;
    }
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let n = std::str::from_utf8(&bytes[1..end]).ok()?.parse().ok()?;
    Some((n, end + 2))
}

/// The slot of the key a packed command acts on, if it names one.
fn command_slot(packed: &[u8]) -> Option<u16> {
    let (args, _) = args(packed, 4)?;
    let name = args.first()?.to_ascii_uppercase();
    let key = match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let keys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
            if keys == 0 {
                return None;
            }
            args.get(3)?
        }
        b"ASKING" | b"CLIENT" | b"CLUSTER" | b"COMMAND" | b"CONFIG" | b"DBSIZE" | b"HELLO"
        | b"INFO" | b"PING" | b"PUBLISH" | b"SCRIPT" | b"TIME" | b"WAIT" => return None,
        _ => args.get(1)?,
    };
    Some(protocol::slot(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A node that answers each command with `answer(args)` (raw RESP) and
    /// records the commands it got, as text (but PING, which it answers).
    struct FakeNode {
        addr: String,
        got: Arc<Mutex<Vec<String>>>,
    }

    impl FakeNode {
        fn start(answer: impl Fn(&[&[u8]]) -> String + Send + 'static) -> FakeNode {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let got = Arc::new(Mutex::new(Vec::new()));
            let log = got.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { return };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while let Some((parts, len)) = args(&buf, 16) {
                            let text: Vec<String> = parts
                                .iter()
                                .map(|p| String::from_utf8_lossy(p).into_owned())
                                .collect();
                            // A connection's first command comes with a
                            // PING (see `Wire`), answered here, not logged.
                            let reply = if parts == [b"PING"] {
                                "+PONG\r\n".to_string()
                            } else {
                                locked(&log).push(text.join(" "));
                                answer(&parts)
                            };
                            buf.drain(..len);
                            if stream.write_all(reply.as_bytes()).is_err() {
                                break;
                            }
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                }
            });
            FakeNode { addr, got }
        }

        fn got(&self) -> Vec<String> {
            locked(&self.got).clone()
        }
    }

    /// A CLUSTER SLOTS reply: every slot on `addr`.
    fn all_slots_on(addr: &str) -> String {
        let (host, port) = addr.rsplit_once(':').unwrap();
        format!(
            "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n${}\r\n{host}\r\n:{port}\r\n",
            host.len()
        )
    }

    /// The confirming pipeline of `wait_replicas`: a keyed script, WAIT.
    fn extend_and_wait(con: &mut Routed) -> RedisResult<(i64, i64)> {
        redis::pipe()
            .cmd("EVAL")
            .arg("return 1")
            .arg(1)
            .arg("lock")
            .cmd("WAIT")
            .arg(1)
            .arg(100)
            .query(con)
    }

    #[test]
    fn a_pipeline_whose_keyed_commands_were_redirected_is_sent_on() {
        for ask in [true, false] {
            let to = FakeNode::start(|args| match args[0] {
                b"ASKING" => "+OK\r\n".into(),
                b"EVAL" => ":1\r\n".into(),
                b"WAIT" => ":1\r\n".into(),
                _ => "-ERR unexpected\r\n".into(),
            });
            let to_addr = to.addr.clone();
            let from = FakeNode::start(move |args| match args[0] {
                b"CLUSTER" => all_slots_on(&to_addr),
                b"EVAL" if ask => format!("-ASK 1234 {to_addr}\r\n"),
                b"EVAL" => format!("-MOVED 1234 {to_addr}\r\n"),
                b"WAIT" => ":0\r\n".into(),
                _ => "-ERR unexpected\r\n".into(),
            });
            // The map says `from` serves every slot.
            let cluster = Arc::new(Cluster::new(
                "redis://".into(),
                vec![from.addr.clone()],
                None,
            ));
            *locked(&cluster.slots) = SlotMap {
                read: Some(Instant::now()),
                ranges: vec![(0, 16383, from.addr.clone())],
                ..SlotMap::default()
            };
            let t = Duration::from_secs(2);
            let mut con = Routed::connect(cluster.clone(), t, t).unwrap();
            assert_eq!(extend_and_wait(&mut con).unwrap(), (1, 1), "ask: {ask}");
            assert_eq!(from.got(), ["EVAL return 1 1 lock", "WAIT 1 100"]);
            if ask {
                // ASKING before the keyed command only; the map stays.
                assert_eq!(to.got(), ["ASKING", "EVAL return 1 1 lock", "WAIT 1 100"]);
                assert!(locked(&cluster.slots).read.is_some());
            } else {
                assert_eq!(to.got(), ["EVAL return 1 1 lock", "WAIT 1 100"]);
                assert!(
                    locked(&cluster.slots).read.is_none(),
                    "MOVED: read the map again"
                );
            }
        }
    }

    #[test]
    fn a_pipeline_redirected_in_part_is_not_sent_again() {
        let other = FakeNode::start(|_| "-ERR never asked\r\n".into());
        let other_addr = other.addr.clone();
        let node = FakeNode::start(move |args| match args {
            [b"GET", b"a"] => format!("-ASK 1 {other_addr}\r\n"),
            [b"GET", _] => "$1\r\nx\r\n".into(),
            _ => "-ERR unexpected\r\n".into(),
        });
        let cluster = Arc::new(Cluster::new(
            "redis://".into(),
            vec![node.addr.clone()],
            None,
        ));
        *locked(&cluster.slots) = SlotMap {
            read: Some(Instant::now()),
            ranges: vec![(0, 16383, node.addr.clone())],
            ..SlotMap::default()
        };
        let t = Duration::from_secs(2);
        let mut con = Routed::connect(cluster, t, t).unwrap();
        let r: RedisResult<(Option<String>, Option<String>)> = redis::pipe()
            .cmd("GET")
            .arg("a")
            .cmd("GET")
            .arg("b")
            .query(&mut con);
        assert!(r.is_err(), "{r:?}");
        assert_eq!(node.got(), ["GET a", "GET b"]);
        assert!(other.got().is_empty());
    }

    #[test]
    fn keys_are_found_in_packed_commands() {
        let script = redis::cmd("EVALSHA")
            .arg("abc")
            .arg(2)
            .arg("{user1}:a")
            .arg("other")
            .arg("token")
            .get_packed_command();
        assert_eq!(command_slot(&script), Some(protocol::slot(b"user1")));
        let keyless = redis::cmd("EVAL")
            .arg("return 1")
            .arg(0)
            .get_packed_command();
        assert_eq!(command_slot(&keyless), None);
        let get = redis::cmd("GET").arg("plain").get_packed_command();
        assert_eq!(command_slot(&get), Some(protocol::slot(b"plain")));
        let slots = redis::cmd("CLUSTER").arg("SLOTS").get_packed_command();
        assert_eq!(command_slot(&slots), None);
        // Binary keys with CR LF inside are read by length.
        let binary = redis::cmd("GET").arg(&b"a\r\nb"[..]).get_packed_command();
        assert_eq!(command_slot(&binary), Some(protocol::slot(b"a\r\nb")));
        assert_eq!(command_slot(b"*1\r\n$3\r\nGE"), None);
        let mut two = get.clone();
        two.extend_from_slice(&slots);
        assert_eq!(commands(&two), vec![&get[..], &slots[..]]);
    }
}
