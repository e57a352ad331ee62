/** Every Liquid tag (`{% … %}`) and output (`{{ … }}`) of a template's source, whitespace control included. */
export const LIQUID = /\{\{-?[\s\S]*?-?\}\}|\{%-?[\s\S]*?-?%\}/g;
