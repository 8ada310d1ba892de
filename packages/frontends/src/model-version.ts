/**
 * @module The version a client names in a route or an RPC, as Triton reads it, for both protocols.
 * Triton: server/src/common.cc GetModelVersionFromString; core/src/model_repository_manager GetModel
 */
import { Errors, parseModelVersion, type Backplane } from '@triode/core';

/**
 * Triton's answer to a version past 2^53 (read as a bigint: no model has one, version folders are
 * safe integers): the model's own error (unknown, or none of it ready), or its version not found.
 */
export async function versionNotFound(name: string, version: bigint, backplane: Backplane): Promise<never> {
  await backplane.modelConfig(name);
  throw Errors.unknownModel(name, String(version));
}

/**
 * The version named by `text` for a model's metadata or config, or a generate request: undefined
 * for the version policy's choice; one past 2^53 is answered not found.
 * @throws INVALID_ARG with Triton's words for a version it cannot read
 */
export async function requestedVersion(name: string, text: string | undefined, backplane: Backplane): Promise<number | undefined> {
  const version = parseModelVersion(text);
  return typeof version === 'bigint' ? versionNotFound(name, version, backplane) : version;
}

/**
 * The version named by `text` as a number, for the questions that answer a version no model has in
 * their own words (readiness: not ready; statistics: not available): one past 2^53 becomes an
 * inexact number past 2^53, which no model has either.
 * @throws INVALID_ARG with Triton's words for a version it cannot read
 */
export function versionNumber(text: string | undefined): number | undefined {
  const version = parseModelVersion(text);
  return typeof version === 'bigint' ? Number(version) : version;
}
