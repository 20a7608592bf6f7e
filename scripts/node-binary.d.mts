/** Types of node-binary.mjs, for the TypeScript that imports it (bench/peers-latest). */
export declare const NODE_LINES: string[];
export declare const NODE_CACHE: string;
export declare function nodeLine(major: number): string;
export declare function run(command: string, args: string[], options?: object): void;
export declare function installNode(version: string, cache?: string): string;
