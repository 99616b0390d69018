#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
    import AuthenticationServices
    import Foundation

    /// The system's passkeys (iCloud Keychain, a passwords app, or a phone nearby) through
    /// `ASAuthorizationController`. The app needs the Associated Domains entitlement
    /// `webcredentials:<relying party id>`, and the server must list the app in its `apple-app-site-association`
    /// (the `apple-app-ids` setting) and accept the origin `https://<relying party id>`.
    public struct PlatformPasskeyAuthenticator: PasskeyAuthenticator {
        private let anchor: @MainActor @Sendable () -> ASPresentationAnchor

        /// An authenticator that shows the system's passkey sheet over the window `presentationAnchor` answers.
        public init(presentationAnchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor) {
            anchor = presentationAnchor
        }

        /// Asks the system for a new passkey (a platform registration request).
        public func createCredential(_ request: PasskeyRegistrationRequest) async throws -> Data {
            try await PasskeyCeremony.register(request, anchor: anchor)
        }

        /// Asks the system to sign with one of its passkeys (a platform assertion request).
        public func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data {
            try await PasskeyCeremony.assert(request, anchor: anchor)
        }
    }

    /// The passkey requests, made on the main actor and run by `AuthorizationCeremony`: the authorization is turned
    /// into the W3C JSON there, so only `Data` leaves it.
    @MainActor
    private enum PasskeyCeremony {
        static func register(
            _ request: PasskeyRegistrationRequest, anchor: @MainActor @Sendable () -> ASPresentationAnchor
        ) async throws -> Data {
            let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(
                relyingPartyIdentifier: request.relyingPartyID)
            let registration = provider.createCredentialRegistrationRequest(
                challenge: request.challenge, name: request.userName, userID: request.userID)
            registration.displayName = request.userDisplayName
            registration.userVerificationPreference = request.requiresUserVerification ? .required : .preferred
            #if !os(visionOS)
                // Passkeys honour the exclude list from iOS 17.4; before, the system replaces its own for this user.
                if #available(iOS 17.4, macOS 13.5, *) {
                    registration.excludedCredentials = request.excludeCredentialIDs.map {
                        ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0)
                    }
                }
            #endif
            return try await AuthorizationCeremony.run(registration, anchor: anchor(), read: json(of:))
        }

        static func assert(
            _ request: PasskeyAssertionRequest, anchor: @MainActor @Sendable () -> ASPresentationAnchor
        ) async throws -> Data {
            let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(
                relyingPartyIdentifier: request.relyingPartyID)
            let assertion = provider.createCredentialAssertionRequest(challenge: request.challenge)
            assertion.allowedCredentials = request.allowCredentialIDs.map {
                ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0)
            }
            assertion.userVerificationPreference = request.requiresUserVerification ? .required : .preferred
            return try await AuthorizationCeremony.run(assertion, anchor: anchor(), read: json(of:))
        }

        /// The W3C JSON of the passkey the system answered with.
        private static func json(of credential: any ASAuthorizationCredential) throws -> Data {
            if let registration = credential as? ASAuthorizationPlatformPublicKeyCredentialRegistration {
                guard let attestationObject = registration.rawAttestationObject else {
                    throw PasskeyAuthenticatorError.failed("The system gave no attestation object")
                }
                let hybrid = registration.attachment == .crossPlatform
                return try PasskeyWire.registration(
                    credentialID: registration.credentialID, clientDataJSON: registration.rawClientDataJSON,
                    attestationObject: attestationObject, transports: hybrid ? ["hybrid"] : ["hybrid", "internal"],
                    attachment: hybrid ? "cross-platform" : "platform")
            }
            if let assertion = credential as? ASAuthorizationPlatformPublicKeyCredentialAssertion {
                guard let authenticatorData = assertion.rawAuthenticatorData, let signature = assertion.signature else {
                    throw PasskeyAuthenticatorError.failed("The system gave no signature")
                }
                return try PasskeyWire.assertion(
                    credentialID: assertion.credentialID, clientDataJSON: assertion.rawClientDataJSON,
                    authenticatorData: authenticatorData, signature: signature, userHandle: assertion.userID,
                    attachment: assertion.attachment == .crossPlatform ? "cross-platform" : "platform")
            }
            throw PasskeyAuthenticatorError.failed("The system answered with another kind of credential")
        }
    }
#endif
