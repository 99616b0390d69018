/// Every stable error code Gatehouse answers with, in one list (after supabase/auth's `errorcode.go`). Clients
/// match on these strings; a new code is added here, never renamed.
public enum ErrorCode: String, CaseIterable, Sendable {
    /// A company session used where only the account session may act.
    case accountSessionRequired = "account_session_required"
    /// A sign-up without an email asks for an anonymous user, and anonymous sign-ins are off.
    case anonymousProviderDisabled = "anonymous_provider_disabled"
    /// An anonymous user asked for what needs a permanent account (companies, shares): confirm an email first.
    case anonymousNotAllowed = "anonymous_not_allowed"
    /// In-app purchases are off (`--app-store-bundle-ids` unset).
    case appStoreDisabled = "app_store_disabled"
    /// Signed App Store data that is not a JWS of the shape Apple signs.
    case appStoreMalformed = "app_store_malformed"
    /// A purchase whose `appAccountToken` is not this company's purchase token.
    case appStoreOtherCompany = "app_store_other_company"
    /// A product that `--app-store-products` does not list.
    case appStoreProductUnknown = "app_store_product_unknown"
    /// An original transaction already bound to another company.
    case appStoreTransactionClaimed = "app_store_transaction_claimed"
    /// A transaction upgraded to another product: the upgrade's transaction counts instead.
    case appStoreTransactionSuperseded = "app_store_transaction_superseded"
    /// Signed App Store data whose algorithm, certificate chain or signature does not verify.
    case appStoreUntrusted = "app_store_untrusted"
    /// Signed App Store data for another app (bundle id or App Apple ID).
    case appStoreWrongApp = "app_store_wrong_app"
    /// Signed App Store data from an environment the server does not accept.
    case appStoreWrongEnvironment = "app_store_wrong_environment"
    /// The PKCE verifier does not match the challenge.
    case badCodeVerifier = "bad_code_verifier"
    /// The body is not JSON of the expected shape (the field is named, the value never echoed).
    case badJson = "bad_json"
    /// An access or identity token that does not verify.
    case badJwt = "bad_jwt"
    /// A request Hummingbird could not read.
    case badRequest = "bad_request"
    /// The member was removed from the company, or their access changed while a live stream was open.
    case companyAccessRevoked = "company_access_revoked"
    /// A company endpoint called without a session logged in to that company.
    case companyContextRequired = "company_context_required"
    /// A company passkey used by a member without a credential, where the company requires one.
    case companyCredentialRequired = "company_credential_required"
    /// The caller already has a credential for this company.
    case credentialExists = "credential_exists"
    /// The link page's form posted from another site.
    case crossSiteRequest = "cross_site_request"
    /// The current password given with a change is wrong (GoTrue's `current_password_invalid`).
    case currentPasswordInvalid = "current_password_invalid"
    /// A mutation sets department bits outside what the caller may grant.
    case deptMaskForbidden = "dept_mask_forbidden"
    /// A non-ASCII address the mail server cannot deliver to (no SMTPUTF8).
    case emailAddressNotSupported = "email_address_not_supported"
    /// The address belongs to another account (only where the caller proved they own it).
    case emailExists = "email_exists"
    /// The right password of a sign-up still waiting for its code.
    case emailNotConfirmed = "email_not_confirmed"
    /// A PKCE authorization code older than five minutes.
    case flowStateExpired = "flow_state_expired"
    /// An unknown, used or replayed PKCE authorization code.
    case flowStateNotFound = "flow_state_not_found"
    /// The caller may not do this in this company.
    case forbidden = "forbidden"
    /// A wrong email, username or password (one answer for all).
    case invalidCredentials = "invalid_credentials"
    /// A record field name is not 1–64 characters of [A-Za-z0-9_] starting with a letter.
    case invalidFieldName = "invalid_field_name"
    /// A record field value is not a string, number, boolean, null, timestamp or reference.
    case invalidFieldValue = "invalid_field_value"
    /// A record id is not a UUID.
    case invalidRecordId = "invalid_record_id"
    /// A record type is not 1–64 characters of [A-Za-z0-9_] starting with a letter.
    case invalidRecordType = "invalid_record_type"
    /// A sync token that was not issued for this company, or was altered.
    case invalidSyncToken = "invalid_sync_token"
    /// The path exists, not with this method.
    case methodNotAllowed = "method_not_allowed"
    /// /metrics asked for on a server started without --metrics-token.
    case metricsDisabled = "metrics_disabled"
    /// No bearer token (or a wrong metrics token).
    case noAuthorization = "no_authorization"
    /// `user_metadata` (or `data`) would be larger than its limit once merged.
    case metadataTooLarge = "metadata_too_large"
    /// The caller is not a member of the company.
    case notAMember = "not_a_member"
    /// The admin API called without a live service key (GoTrue's `not_admin`).
    case notAdmin = "not_admin"
    /// No such route or resource.
    case notFound = "not_found"
    /// The store is not reachable or not migrated yet.
    case notReady = "not_ready"
    /// A mailed code or link that is wrong, used, voided or expired.
    case otpExpired = "otp_expired"
    /// A code asked with `create_user: false` for an address with no account, with `--reveal-accounts on`.
    case otpDisabled = "otp_disabled"
    /// A mail limit (per IP, or the per-address cooldown).
    case overEmailSendRateLimit = "over_email_send_rate_limit"
    /// A request limit or a backoff; Retry-After says when.
    case overRequestRateLimit = "over_request_rate_limit"
    /// The owner opened their own share link.
    case ownerCannotAccept = "owner_cannot_accept"
    /// The owner must transfer the company first.
    case ownerCannotLeave = "owner_cannot_leave"
    /// An account that still owns companies cannot be deleted.
    case ownsCompanies = "owns_companies"
    /// The tier's participant limit is reached.
    case participantLimitReached = "participant_limit_reached"
    /// The body is larger than --max-body-size.
    case payloadTooLarge = "payload_too_large"
    /// Sign in with Apple is not configured (or another provider was asked for).
    case providerDisabled = "provider_disabled"
    /// A read-only participant pushed a mutation.
    case readOnly = "read_only"
    /// A password or email change without the current password or a code.
    case reauthenticationNeeded = "reauthentication_needed"
    /// A wrong or expired reauthentication code.
    case reauthenticationNotValid = "reauthentication_not_valid"
    /// An update to a record deleted after the mutation's base.
    case recordDeleted = "record_deleted"
    /// A mutation of a record the caller may not see.
    case recordForbidden = "record_forbidden"
    /// A record over 256 KiB encoded.
    case recordTooLarge = "record_too_large"
    /// A rotated refresh token presented after the grace window: the session ended.
    case refreshTokenAlreadyUsed = "refresh_token_already_used"
    /// An unknown refresh token.
    case refreshTokenNotFound = "refresh_token_not_found"
    /// The owner removed the account after this share link was made: only a link made since re-admits it.
    case removedFromCompany = "removed_from_company"
    /// A sync token older than the retained change log: run the digest exchange.
    case resyncRequired = "resync_required"
    /// The new password equals the current one.
    case samePassword = "same_password"
    /// The session is revoked, idle too long or past its lifetime.
    case sessionExpired = "session_expired"
    /// This instance holds as many live streams as it may (503 with Retry-After): try again, or another instance.
    case serverBusy = "server_busy"
    /// The access token's session has ended.
    case sessionNotFound = "session_not_found"
    /// A share link that is expired, revoked or used up.
    case shareExpired = "share_expired"
    /// The store cannot be reached (503 with Retry-After); nothing was decided, the same request may be sent again.
    case storeUnavailable = "store_unavailable"
    /// The company's tier does not allow sharing.
    case tierForbidsSharing = "tier_forbids_sharing"
    /// A record with more than 200 fields.
    case tooManyFields = "too_many_fields"
    /// A push of more than 1,000 mutations (or a digest chunk of more than 10,000 ids).
    case tooManyMutations = "too_many_mutations"
    /// The session already holds as many live streams as it may (429): close one first.
    case tooManyStreams = "too_many_streams"
    /// A mutation names another type than the record has.
    case typeMismatch = "type_mismatch"
    /// Anything unexpected; logged once on the server.
    case unexpectedFailure = "unexpected_failure"
    /// Grant_type is not password, refresh_token, id_token or pkce.
    case unsupportedGrantType = "unsupported_grant_type"
    /// A body not declared as JSON (or, for the link form, as a form).
    case unsupportedMediaType = "unsupported_media_type"
    /// The account is disabled.
    /// The admin API was asked to create a user with an id that is taken.
    case userAlreadyExists = "user_already_exists"
    case userBanned = "user_banned"
    /// The token's account no longer exists.
    case userNotFound = "user_not_found"
    /// A value breaks a documented rule (the message says which).
    case validationFailed = "validation_failed"
    /// The password breaks the policy; weak_password.reasons lists why.
    case weakPassword = "weak_password"
    /// The session is at aal1 where a verified second factor is needed (enrolling another factor, removing a
    /// verified one, recovery codes, a company that requires it).
    case insufficientAal = "insufficient_aal"
    /// A factor challenge older than five minutes: ask for another.
    case mfaChallengeExpired = "mfa_challenge_expired"
    /// The user has a factor of that friendly name already.
    case mfaFactorNameConflict = "mfa_factor_name_conflict"
    /// No such factor or challenge of the caller's.
    case mfaFactorNotFound = "mfa_factor_not_found"
    /// A challenge verified already, or verified from another client address than it was made from.
    case mfaIpAddressMismatch = "mfa_ip_address_mismatch"
    /// Five wrong recovery codes in fifteen minutes: wait.
    case mfaRecoveryCodesLocked = "mfa_recovery_codes_locked"
    /// Recovery codes need a verified TOTP factor beside them; they are never the only factor.
    case mfaRecoveryCodesSoleFactor = "mfa_recovery_codes_sole_factor"
    /// A wrong, used or out-of-window TOTP code, or a wrong or spent recovery code.
    case mfaVerificationFailed = "mfa_verification_failed"
    /// Recovery codes exist already: regenerate them instead.
    case mfaVerifiedFactorExists = "mfa_verified_factor_exists"
    /// The user has ten factors already.
    case tooManyEnrolledMfaFactors = "too_many_enrolled_mfa_factors"
    /// Passkeys are off on this server (`--passkeys`): every passkey route answers 404 with this code, as GoTrue.
    case passkeyDisabled = "passkey_disabled"
    /// The user (or the member, in a company) has ten passkeys already.
    case tooManyPasskeys = "too_many_passkeys"
    /// A passkey challenge older than five minutes: ask for new options.
    case webauthnChallengeExpired = "webauthn_challenge_expired"
    /// No such challenge for this ceremony and user, or it was used already (each is single use).
    case webauthnChallengeNotFound = "webauthn_challenge_not_found"
    /// That authenticator's credential is registered already.
    case webauthnCredentialExists = "webauthn_credential_exists"
    /// The passkey is not known here (never registered, removed, or not for this account or company).
    case webauthnCredentialNotFound = "webauthn_credential_not_found"
    /// The credential or assertion failed a WebAuthn check (origin, RP id, challenge, flags, signature, counter, a
    /// malformed field); the audit log says which.
    case webauthnVerificationFailed = "webauthn_verification_failed"
    /// Apple refused the authorization code sent with an Apple identity token (used, expired, or for another app).
    case appleCodeRejected = "apple_code_rejected"
    /// A Sign in with Apple notification that is not a JWS of the shape Apple signs.
    case appleNotificationMalformed = "apple_notification_malformed"
    /// A Sign in with Apple notification whose signature, issuer, audience or age does not verify.
    case appleNotificationUntrusted = "apple_notification_untrusted"
    /// The identity to link already belongs to a user.
    case identityAlreadyExists = "identity_already_exists"
    /// No identity of the signed-in user has that `identity_id`.
    case identityNotFound = "identity_not_found"
    /// Linking or unlinking identities by the user is off (`--manual-linking off`).
    case manualLinkingDisabled = "manual_linking_disabled"
    /// The browser's return from a provider names no trip, a trip used already, or one another browser started.
    case badOAuthState = "bad_oauth_state"
    /// The provider's return carries no state or no code.
    case badOAuthCallback = "bad_oauth_callback"
    /// The provider refused (the user declined), or its token or userinfo answer could not be used.
    case oauthProviderError = "oauth_provider_error"
    /// No OAuth client with this id (the provider's admin API, `/oauth/authorize`).
    case oauthClientNotFound = "oauth_client_not_found"
    /// No pending authorization request with this id for the signed-in user (GoTrue's code).
    case oauthAuthorizationNotFound = "oauth_authorization_not_found"
    /// The user has granted this client nothing (`DELETE /user/oauth/grants`).
    case oauthConsentNotFound = "oauth_consent_not_found"
    /// `POST /oauth/clients/register` while `--oauth-allow-dynamic-registration` is off.
    case oauthDynamicClientRegistrationDisabled = "oauth_dynamic_client_registration_disabled"
    /// The OAuth 2.1 provider is off (`--oauth-server off`).
    case oauthServerDisabled = "oauth_server_disabled"
    /// The provider did not verify the identity's address: it neither creates an account nor joins one with that address.
    case providerEmailNeedsVerification = "provider_email_needs_verification"
    /// Unlinking the user's last way to sign in.
    case singleIdentityNotDeletable = "single_identity_not_deletable"
    /// A custom provider with that identifier exists already (GoTrue's code).
    case conflict = "conflict"
    /// No custom provider has that identifier.
    case providerNotFound = "provider_not_found"
    /// Another company holds that domain verified: one company per domain. Nothing changed.
    case domainAlreadyVerified = "domain_already_verified"
    /// The company has added that domain already.
    case domainExists = "domain_exists"
    /// The domain's challenge TXT record was not found, or holds another value: the domain stays pending.
    case domainRecordNotFound = "domain_record_not_found"
    /// The DNS resolver (`--dns-resolver`) did not answer in time, or answered with a failure: try again later.
    case dnsLookupFailed = "dns_lookup_failed"
    /// An invitation to an account that is a member already (or a member accepting one).
    case alreadyMember = "already_member"
    /// An invitation accepted or declined by an account whose confirmed address is not the invited one.
    case invitationEmailMismatch = "invitation_email_mismatch"
    /// An invitation past its expiry (7 days after it was last sent).
    case invitationExpired = "invitation_expired"
    /// No invitation has that id, link token or code.
    case invitationNotFound = "invitation_not_found"
    /// An invitation already accepted or declined: each is used once.
    case invitationUsed = "invitation_used"
    /// An invitation its company revoked, or replaced with a newer one to the same address.
    case invitationRevoked = "invitation_revoked"
    /// A SAML assertion without an email address (no mapped attribute, known attribute or email NameID).
    case samlAssertionNoEmail = "saml_assertion_no_email"
    /// A SAML assertion with no subject-id attribute and no NameID that names the user lastingly.
    case samlAssertionNoUserId = "saml_assertion_no_user_id"
    /// New SAML metadata for a provider names another IdP entity id.
    case samlEntityIdMismatch = "saml_entity_id_mismatch"
    /// A SAML identity provider with this entity id is registered already.
    case samlIdpAlreadyExists = "saml_idp_already_exists"
    /// A SAML response from an identity provider no provider here names.
    case samlIdpNotFound = "saml_idp_not_found"
    /// The identity provider's metadata_url could not be fetched or read.
    case samlMetadataFetchFailed = "saml_metadata_fetch_failed"
    /// A SAML answer for a sign-in that took too long.
    case samlRelayStateExpired = "saml_relay_state_expired"
    /// A SAML answer for a sign-in that is unknown or was finished already.
    case samlRelayStateNotFound = "saml_relay_state_not_found"
    /// An email domain another identity provider signs in already.
    case ssoDomainAlreadyExists = "sso_domain_already_exists"
    /// The identity provider is disabled.
    case ssoProviderDisabled = "sso_provider_disabled"
    /// No identity provider with this id, resource id or domain.
    case ssoProviderNotFound = "sso_provider_not_found"
    /// The address's company signs its people in through its identity provider: sign in with single sign-on (POST /auth/v1/sso).
    case ssoRequired = "sso_required"
    /// A single sign-on account: its address, password and identities are its identity provider's.
    case userSsoManaged = "user_sso_managed"
    /// An auth hook did not answer within 5 seconds (`--hook-<name>-uri`); it is not tried again. The request fails
    /// closed.
    case hookTimeout = "hook_timeout"
    /// An auth hook could not be reached in three tries. The request fails closed.
    case hookTimeoutAfterRetry = "hook_timeout_after_retry"
    /// An auth hook answered more than 200 KB. The request fails closed.
    case hookPayloadOverSizeLimit = "hook_payload_over_size_limit"
    /// An auth hook answered something other than JSON. The request fails closed.
    case hookPayloadInvalidContentType = "hook_payload_invalid_content_type"
    /// An auth hook answered with an error of its own, or an answer Gatehouse cannot use (a custom access token hook
    /// that dropped a required claim). The request fails closed.
    case hookFailed = "hook_failed"
    /// The MFA verification attempt hook refused the code: the user is signed out.
    case mfaVerificationRejected = "mfa_verification_rejected"
    /// No webhook endpoint (or delivery) with this id.
    case webhookNotFound = "webhook_not_found"
    /// A webhook endpoint's URL is not an absolute http(s) URL, or names a loopback, link-local or private address
    /// (allowed only with `--webhooks-allow-private-targets on`).
    case webhookTargetRefused = "webhook_target_refused"
    /// A webhook endpoint asked for an event type Gatehouse does not send.
    case webhookEventUnknown = "webhook_event_unknown"
}
