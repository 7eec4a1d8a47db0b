//! CRC16-CCITT (XModem), the checksum Redis Cluster hashes keys with. A
//! file of its own because build.rs includes it too, to precompute the
//! table of slot tags (`protocol::slot_tag`).

/// The CRC of every byte value, built at compile time: one lookup per byte
/// of a key instead of eight shifts (a lock name is hashed on every
/// acquire).
const TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-CCITT (XModem) of `data`.
pub(crate) fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}
