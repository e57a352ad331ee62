// Send fan-out through the real local queue (filled in below once the send pipeline is available).
export const measureFanout = async () => ({ status: "skipped", reason: "the send pipeline is not in this build" });
