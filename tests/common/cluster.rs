//! Cluster helpers for the tests: which node is which.

use super::Server;

pub fn replication(srv: &Server) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query(&mut srv.raw())
        .unwrap()
}

pub fn is_replica(srv: &Server) -> bool {
    replication(srv).contains("role:slave")
}

/// The replica of `servers[master]`.
pub fn replica_of(servers: &[Server], master: usize) -> usize {
    let port = format!("master_port:{}\r\n", servers[master].port);
    servers
        .iter()
        .position(|s| {
            let info = replication(s);
            info.contains("role:slave") && info.contains(&port)
        })
        .expect("every master has a replica")
}

/// The server that owns `slot`, by its own `CLUSTER SLOTS`.
pub fn owner(servers: &[Server], slot: u16) -> usize {
    servers
        .iter()
        .position(|s| {
            let mine: Vec<redis::Value> = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query(&mut s.raw())
                .unwrap();
            mine.iter().any(|r| match r {
                redis::Value::Array(p) => match (&p[0], &p[1], &p[2]) {
                    (redis::Value::Int(a), redis::Value::Int(b), redis::Value::Array(m)) => {
                        (*a..=*b).contains(&(slot as i64))
                            && m.get(1) == Some(&redis::Value::Int(s.port as i64))
                    }
                    _ => false,
                },
                _ => false,
            })
        })
        .expect("a node owns every slot")
}
