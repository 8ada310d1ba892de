/** @module Moved to @triode/core (the frontends' tracer warns with it too); kept here for the cluster's imports. */
export { RateLimitedWarning } from '@triode/core';
