/** `text` with every unsubscribe or confirmation link token in it replaced by `{token}`. */
export declare const maskTokenPaths: (text: string) => string;
