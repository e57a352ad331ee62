/** A queue message's retry delay: exponential on its attempt count, from 2 s, capped at five minutes. */
export const backoffSeconds = (attempts: number) => Math.min(300, 2 ** Math.max(1, attempts));
