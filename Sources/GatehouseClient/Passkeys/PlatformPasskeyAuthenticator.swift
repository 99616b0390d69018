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
            try await PlatformCeremony.register(request, anchor: anchor)
        }

        /// Asks the system to sign with one of its passkeys (a platform assertion request).
        public func getAssertion(_ request: PasskeyAssertionRequest) async throws -> Data {
            try await PlatformCeremony.assert(request, anchor: anchor)
        }
    }

    /// One `ASAuthorizationController` run, its delegate bridged to async: the authorization is turned into the W3C
    /// JSON on the main actor, so only `Data` leaves it. The controller holds its delegate weakly; the running method
    /// holds the ceremony, and the ceremony the controller.
    @MainActor
    private final class PlatformCeremony: NSObject {
        private let anchor: ASPresentationAnchor
        private var controller: ASAuthorizationController?
        private var continuation: CheckedContinuation<Data, any Error>?

        private init(anchor: ASPresentationAnchor) {
            self.anchor = anchor
        }

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
            let ceremony = PlatformCeremony(anchor: anchor())
            return try await ceremony.run(registration)
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
            let ceremony = PlatformCeremony(anchor: anchor())
            return try await ceremony.run(assertion)
        }

        private func run(_ request: ASAuthorizationRequest) async throws -> Data {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    self.continuation = continuation
                    let controller = ASAuthorizationController(authorizationRequests: [request])
                    controller.delegate = self
                    controller.presentationContextProvider = self
                    self.controller = controller
                    controller.performRequests()
                }
            } onCancel: {
                // The sheet closes and the delegate hears `canceled`.
                Task { @MainActor in self.controller?.cancel() }
            }
        }

        private func finish(_ answer: () throws -> Data) {
            continuation?.resume(with: Result(catching: answer))
            continuation = nil
            controller = nil
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

        /// What the system's error means to the app: a dismissed sheet is `cancelled`.
        private static func reason(for error: any Error) -> PasskeyAuthenticatorError {
            guard let error = error as? ASAuthorizationError else { return .failed(error.localizedDescription) }
            if error.code == .canceled { return .cancelled }
            if #available(iOS 18, macOS 15, visionOS 2, *), error.code == .matchedExcludedCredential {
                return .credentialExcluded
            }
            return .failed(error.localizedDescription)
        }
    }

    extension PlatformCeremony: ASAuthorizationControllerDelegate {
        func authorizationController(
            controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization
        ) {
            finish { try Self.json(of: authorization.credential) }
        }

        func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) {
            finish { throw Self.reason(for: error) }
        }
    }

    extension PlatformCeremony: ASAuthorizationControllerPresentationContextProviding {
        func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }
    }
#endif
