/// Every action the audit trail records, in one list. Details never hold a secret; emails only as digests.
public enum AuditAction: String, CaseIterable, Sendable {
    case accountDeleted = "account_deleted"
    case accountDeletionRefused = "account_deletion_refused"
    case accountDisabled = "account_disabled"
    /// `gatehouse users enable`: the only way out of `users disable`.
    case accountEnabled = "account_enabled"
    /// The admin API (a service key's id in the detail) changed an account: `admin_user_…`, and its generated links.
    case adminLinkGenerated = "admin_link_generated"
    case adminUserCreated = "admin_user_created"
    case adminUserDeleted = "admin_user_deleted"
    case adminUserUpdated = "admin_user_updated"
    case adminUserInvited = "admin_user_invited"
    /// Refusals from one address stopped being recorded for a while (`SessionService.auditRefusal`).
    case auditSuppressed = "audit_suppressed"
    case authorizationRefused = "authorization_refused"
    /// A ban of a set length ended (the sweeper).
    case banLifted = "ban_lifted"
    case companyCreated = "company_created"
    case companyDeleted = "company_deleted"
    case companyLogin = "company_login"
    case companyLoginFailed = "company_login_failed"
    case companyUpdated = "company_updated"
    /// A company's domains: added, proven by its TXT record, removed, and verification dropped after repeated failed
    /// re-checks (the owner is mailed).
    case domainAdded = "domain_added"
    case domainVerified = "domain_verified"
    case domainRemoved = "domain_removed"
    case domainVerificationLost = "domain_verification_lost"
    /// Joining by domain: the setting changed, an account joined or asked to, the owner approved or declined.
    case domainJoinChanged = "domain_join_changed"
    case domainJoined = "domain_joined"
    case domainJoinRequested = "domain_join_requested"
    case domainJoinApproved = "domain_join_approved"
    case domainJoinDeclined = "domain_join_declined"
    case credentialCreated = "credential_created"
    case credentialDeleted = "credential_deleted"
    case credentialPasswordChangeFailed = "credential_password_change_failed"
    case credentialPasswordChanged = "credential_password_changed"
    case emailChangeRequested = "email_change_requested"
    case emailChanged = "email_changed"
    case identityLinked = "identity_linked"
    /// The user (or Apple's `account-delete`) removed an identity.
    case identityUnlinked = "identity_unlinked"
    /// An Apple refresh token was revoked at Apple, or given up after retrying (the detail says which).
    case appleTokenRevoked = "apple_token_revoked"
    /// A Sign in with Apple notification was applied (its `type` in the detail), or refused.
    case appleNotified = "apple_notified"
    case appleNotificationRefused = "apple_notification_refused"
    /// The admin API (a service key's id in the detail) registered, changed or removed a custom provider.
    case customProviderCreated = "custom_provider_created"
    case customProviderUpdated = "custom_provider_updated"
    case customProviderDeleted = "custom_provider_deleted"
    /// A company's identity provider registered, changed or removed (`/auth/v1/admin/sso/providers`).
    case ssoProviderCreated = "sso_provider_created"
    case ssoProviderUpdated = "sso_provider_updated"
    case ssoProviderDeleted = "sso_provider_deleted"
    /// A company's owner turned requiring its identity provider on or off.
    case ssoRequirementChanged = "sso_requirement_changed"
    /// The operator role granted or taken away (`gatehouse operators add|remove`).
    case operatorGranted = "operator_granted"
    case operatorRevoked = "operator_revoked"
    /// An operator's console session began, or ended (idle, too old, or signed out); and an action the operator took
    /// in the console (its `action` and the operator's id, `operator_id`, in the detail).
    case consoleSessionStarted = "console_session_started"
    case consoleSessionEnded = "console_session_ended"
    case consoleAction = "console_action"
    case loggedOut = "logged_out"
    case memberChanged = "member_changed"
    case memberLeft = "member_left"
    case memberRemoved = "member_removed"
    case otpSent = "otp_sent"
    case ownershipTransferred = "ownership_transferred"
    case passwordChangeRefused = "password_change_refused"
    case passwordChanged = "password_changed"
    case pendingSignupResolved = "pending_signup_resolved"
    case profileUpdated = "profile_updated"
    case rateLimited = "rate_limited"
    case reauthenticationRequested = "reauthentication_requested"
    case recoveryRequested = "recovery_requested"
    case refreshTokenReused = "refresh_token_reused"
    case secretsReencrypted = "secrets_reencrypted"
    case sessionRevoked = "session_revoked"
    case shareAccepted = "share_accepted"
    case shareCreated = "share_created"
    case shareRefused = "share_refused"
    case shareRevoked = "share_revoked"
    case serviceKeyMinted = "service_key_minted"
    case serviceKeyRevoked = "service_key_revoked"
    case signInFailed = "sign_in_failed"
    case signedIn = "signed_in"
    case signedOutEverywhere = "signed_out_everywhere"
    case signingKeyRotated = "signing_key_rotated"
    case signup = "signup"
    case signupCodeResent = "signup_code_resent"
    case signupExistingEmail = "signup_existing_email"
    case tierChanged = "tier_changed"
    /// App Store subscriptions: a purchase the app reported, a notification applied (or refused), and one that
    /// changed nothing because newer signed data was already applied. The detail names the source, the notification
    /// type and the transaction ids, never the signed data.
    case subscriptionReported = "subscription_reported"
    case subscriptionNotified = "subscription_notified"
    case subscriptionRefused = "subscription_refused"
    case subscriptionStale = "subscription_stale"
    /// `gatehouse app-store reconcile` applied what the App Store Server API says of a subscription.
    case subscriptionReconciled = "subscription_reconciled"
    case tokenRefreshed = "token_refreshed"
    case tokenRejected = "token_rejected"
    /// `gatehouse users import` wrote the account.
    case userImported = "user_imported"
    case verified = "verified"
    case verifyFailed = "verify_failed"
    /// Second factors: enrolled, first verified, removed (by the user, the admin API or `users factors reset`), each
    /// step-up to aal2 and each wrong code, recovery codes made, removed and used.
    case factorEnrolled = "factor_enrolled"
    case factorVerified = "factor_verified"
    case factorDeleted = "factor_deleted"
    case mfaVerified = "mfa_verified"
    case mfaVerifyFailed = "mfa_verify_failed"
    case recoveryCodesGenerated = "recovery_codes_generated"
    case recoveryCodesDeleted = "recovery_codes_deleted"
    case recoveryCodeUsed = "recovery_code_used"
    case factorsReset = "factors_reset"
    /// A first factor refused for want of recent proof (a sign-in in the last ten minutes, the current password or a
    /// reauthentication code), with its reason.
    case factorEnrollRefused = "factor_enroll_refused"
    /// Passkeys, account or company (`company_id` in the event): registered, renamed, removed (by the user or the
    /// admin API), a refused registration, sign-in or company login (with its reason), and a sign counter that went
    /// back (a cloned authenticator; the passkey is refused).
    case passkeyCreated = "passkey_created"
    case passkeyUpdated = "passkey_updated"
    case passkeyDeleted = "passkey_deleted"
    case passkeyRegistrationFailed = "passkey_registration_failed"
    case passkeySignInFailed = "passkey_sign_in_failed"
    case passkeyCloneSuspected = "passkey_clone_suspected"
    /// Invitations by email: sent (or replaced by a new one to the same address), mailed again, revoked, accepted
    /// and declined. The detail names the invitation and its role, never its address's token or code.
    case invitationSent = "invitation_sent"
    case invitationResent = "invitation_resent"
    case invitationRevoked = "invitation_revoked"
    case invitationAccepted = "invitation_accepted"
    case invitationDeclined = "invitation_declined"
    /// Webhook endpoints: registered, removed, turned on again, their secret rotated, a delivery replayed (the
    /// endpoint's id in `webhook`); and turned off, by a 410 or a delivery that failed through the whole schedule.
    case webhookCreated = "webhook_created"
    case webhookDeleted = "webhook_deleted"
    case webhookEnabled = "webhook_enabled"
    case webhookDisabled = "webhook_disabled"
    case webhookSecretRotated = "webhook_secret_rotated"
    case webhookReplayed = "webhook_replayed"
    /// The OAuth provider's clients (`client_id` in the detail): registered by the operator or, when allowed, by
    /// anyone (`registration: dynamic`), changed, removed, their secret replaced.
    case oauthClientCreated = "oauth_client_created"
    case oauthClientUpdated = "oauth_client_updated"
    case oauthClientDeleted = "oauth_client_deleted"
    case oauthClientSecretRegenerated = "oauth_client_secret_regenerated"
    /// A user let a client in (`client_id`, `scope`), or refused it; revoked its grant (its sessions end).
    case oauthConsentGranted = "oauth_consent_granted"
    case oauthConsentDenied = "oauth_consent_denied"
    case oauthGrantRevoked = "oauth_grant_revoked"
    /// A client exchanged a code or device code for a session (`client_id`, `grant`); a code presented twice ends
    /// the session it made (`oauth_code_reused`).
    case oauthTokenIssued = "oauth_token_issued"
    case oauthCodeReused = "oauth_code_reused"
}
