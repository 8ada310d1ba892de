/** Types of classify.mjs. */

/** What one request got back (HTTP status and body, gRPC status and message, or how it ended). */
export interface FuzzOutcome {
  status?: number;
  body?: string;
  grpc?: number;
  message?: string;
  streamErrors?: string[];
  streamResponses?: number;
  hang?: boolean;
  closed?: boolean;
  aborted?: string;
}

export interface FuzzFindingOf {
  type: 'unexplained-5xx' | 'explained-5xx' | 'leak' | 'hang' | 'drop';
  detail: string;
}

export function classify(c: { badBytes?: boolean; mayClose?: boolean; kind?: string; expectResponses?: number }, o: FuzzOutcome, request: string, secrets: string[]): FuzzFindingOf[];
export function leakOf(message: string, request: string, secrets: string[]): string | undefined;
