//! CRC16-CCITT (XModem), the checksum Redis Cluster hashes keys with. A
//! file of its own because build.rs includes it too, to precompute the
//! table of slot tags (`protocol::slot_tag`).

/// CRC16-CCITT (XModem) of `data`.
pub(crate) fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}
